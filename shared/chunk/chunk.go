// Package chunk splits a document's parsed Markdown into chunks for indexing,
// following the chunk presets of the original Yuxi (knowledge/chunking/
// ragflow_like): general, qa, book, laws, semantic and separator. Each preset
// is a pure function of the Markdown, the parser config (chunk_parser_config)
// and the original filename; only the semantic preset talks to the outside,
// through the Embedder the caller passes in.
//
// Chunks carry content-derived ids (ChunkIDs), so re-indexing unchanged text
// yields the same ids and only new or changed chunks need embedding.
//
// Token counts are the original's CJK-aware approximation (CountTokens), not a
// model tokenizer. StartChar/EndChar are byte offsets into the input string
// (markdown[c.StartChar:c.EndChar]); -1 when the chunk could not be located.
//
// Imported by: functions/kb-index (chunking on index) and shared/kb plus the
// knowledge routes (ParseConfig, ResolvePreset, Presets for
// GET /api/knowledge/chunk-presets). May import: the standard library and
// shared/failure. It holds no state: no package-level variables other than
// compiled, read-only regular expressions.
package chunk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// EngineVersion names the chunking algorithms; processing snapshots record it
// so that a change of algorithm can be told apart from a change of config.
// It differs from the original's "ragflow_like_v1": the chunks are close to,
// not byte-identical with, the Python implementation's.
const EngineVersion = "ragflow_like_go_v1"

// Chunk is one piece of a document, ready to be embedded and stored.
type Chunk struct {
	// Index is the chunk's position in Split's result, 0..n-1 without gaps:
	// empty chunks are dropped before numbering (the original kept counting
	// over them; ids no longer depend on positions, so gaps serve nothing).
	Index   int    `json:"index"`
	Content string `json:"content"`
	// TokenCount is CountTokens(Content).
	TokenCount int `json:"token_count"`
	// StartChar and EndChar are BYTE offsets into the Markdown given to Split,
	// [StartChar, EndChar): the span of source text the chunk was made from,
	// found by searching its source lines in order from the previous chunk's
	// start (text a preset adds — heading paths, a semantic header, "问题："
	// prefixes — is not searched; the span is the chunk itself when it
	// occurs verbatim). Both are -1 when no source text could be found.
	StartChar int `json:"start_char"`
	EndChar   int `json:"end_char"`
	// ContentHash is the hex SHA-256 of Content.
	ContentHash string `json:"content_hash"`
	// Headings is the heading path of the chunk, outermost first, without
	// Markdown '#' marks: the preset's own where it builds one (book and laws
	// heading trees, the semantic heading stack), otherwise the document's
	// ATX headings in force at StartChar. Nil when there is none.
	Headings []string `json:"headings,omitempty"`
}

// Embedder turns texts into vectors, one per text, in order. Only the
// semantic preset uses it, to cluster the sentences of over-long lines.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Options are the per-document inputs besides the text and the config.
type Options struct {
	// Filename is the original file name; its suffix selects the qa
	// extractors (.md, .txt, .csv, .xlsx, …) and the laws .docx heading tree.
	Filename string
	// Embedder is used by the semantic preset; nil makes it pack sentences
	// greedily instead of clustering them, as the original does without a model.
	Embedder Embedder
}

// Split chunks markdown with the preset (resolved with ResolvePreset) and cfg.
// A zero ChunkTokenNum or Delimiter in cfg takes the default; an out-of-range
// ChunkTokenNum or an unknown Language is an "invalid_chunk_config" error.
// Other errors come from the context or the Embedder (semantic preset only)
// and are worth retrying.
//
// Hard limits on TokenCount, for every chunk: general ≤ 1.5×ChunkTokenNum;
// separator, book, laws and semantic ≤ ChunkTokenNum; qa has no limit.
func Split(ctx context.Context, preset string, markdown string, cfg Config, opts Options) ([]Chunk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	var pieces []piece
	switch ResolvePreset(preset) {
	case PresetQA:
		pieces = splitQA(markdown, cfg, opts.Filename)
	case PresetBook:
		pieces = splitBook(markdown, cfg)
	case PresetLaws:
		pieces = splitLaws(markdown, cfg, opts.Filename)
	case PresetSemantic:
		pieces, err = splitSemantic(ctx, markdown, cfg, opts.Embedder)
		if err != nil {
			return nil, err
		}
	case PresetSeparator:
		pieces = splitSeparator(markdown, cfg)
	default:
		pieces = splitGeneral(markdown, cfg)
	}
	return finalize(markdown, pieces), nil
}

// piece is what a preset produces: the chunk text, and what it knows about
// where the text came from.
type piece struct {
	text string
	// headings is the preset's heading path; nil lets finalize derive it.
	headings []string
	// anchors are source snippets, in document order, to locate the piece by
	// when its text is not a verbatim substring; nil means its own lines.
	anchors []string
}

// finalize trims, drops empty pieces, numbers, hashes and locates the chunks.
func finalize(markdown string, pieces []piece) []Chunk {
	ol := scanOutline(markdown)
	out := make([]Chunk, 0, len(pieces))
	cursor := 0
	for _, p := range pieces {
		content := strings.TrimSpace(p.text)
		if content == "" {
			continue
		}
		start, end := locate(markdown, content, p.anchors, cursor)
		if start >= 0 {
			cursor = start + 1
		}
		headings := p.headings
		if headings == nil && start >= 0 {
			headings = ol.pathAt(start)
		}
		if len(headings) == 0 {
			headings = nil
		}
		out = append(out, Chunk{
			Index:       len(out),
			Content:     content,
			TokenCount:  CountTokens(content),
			StartChar:   start,
			EndChar:     end,
			ContentHash: hashHex(content),
			Headings:    headings,
		})
	}
	return out
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// locate finds the source span of a chunk: its anchors (by default its
// lines) found one after the other, anchors not found skipped (text the
// preset added: a header, a path line); the span is the chunk itself when it
// occurs verbatim there. It searches near the cursor first (cheap: a missing
// anchor costs one window), then from the cursor on, then from the top (qa
// emits heading pairs before table pairs, out of document order).
func locate(md, content string, anchors []string, from int) (int, int) {
	from = min(from, len(md))
	if anchors == nil {
		anchors = strings.Split(content, "\n")
	}
	clean := anchors[:0:0]
	for _, a := range anchors {
		if a = strings.TrimSpace(a); a != "" {
			clean = append(clean, a)
		}
	}
	window := max(1<<16, 8*len(content))
	for _, try := range []struct{ base, window int }{{from, window}, {from, len(md)}, {0, len(md)}} {
		s, e, ok := locateAnchors(md, clean, try.base, try.window)
		if !ok {
			continue
		}
		if i := strings.Index(md[s:min(len(md), e+len(content))], content); i >= 0 {
			return s + i, s + i + len(content)
		}
		return s, e
	}
	return -1, -1
}

// locateAnchors finds anchors in order from base, each within window bytes
// of where the previous one ended.
func locateAnchors(md string, anchors []string, base, window int) (int, int, bool) {
	start, end := -1, -1
	at := base
	for _, a := range anchors {
		i := strings.Index(md[at:min(len(md), at+window)], a)
		if i < 0 {
			continue
		}
		if start < 0 {
			start = at + i
		}
		end = at + i + len(a)
		at = end
	}
	return start, end, start >= 0
}

// outline is the document's ATX heading path after each heading.
type outline struct {
	pos   []int
	paths [][]string
}

func scanOutline(md string) outline {
	var ol outline
	var stack [6]string
	fence := ""
	off := 0
	for _, line := range strings.SplitAfter(md, "\n") {
		lineStart := off
		off += len(line)
		l := strings.TrimRight(line, "\r\n")
		if fence != "" {
			if isFenceClose(l, fence) {
				fence = ""
			}
			continue
		}
		if f, ok := fenceOpen(l); ok {
			fence = f
			continue
		}
		level, title, ok := atxHeading(l)
		if !ok {
			continue
		}
		stack[level-1] = title
		for i := level; i < 6; i++ {
			stack[i] = ""
		}
		ol.pos = append(ol.pos, lineStart)
		ol.paths = append(ol.paths, nonEmpty(stack[:]))
	}
	return ol
}

func (ol outline) pathAt(at int) []string {
	i := sort.Search(len(ol.pos), func(i int) bool { return ol.pos[i] > at }) - 1
	if i < 0 {
		return nil
	}
	return append([]string(nil), ol.paths[i]...)
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
