package chunk

import (
	"context"
	"fmt"
	"strings"
)

// splitSemantic is the semantic preset. The Markdown is read block by block
// with a heading stack; text accumulates under the current heading and is
// flushed into chunks at each heading, table, list, math block, HTML block or
// captioned image. Each chunk starts with a header line
// "{'#'×level} {heading path joined by '|'}", plus "|Table", "|Math Block" or
// "|{caption}" for those elements and "|Part n" when the content had to be
// split; a chunk before any heading has no header (the original printed a
// bare "#", or "#|Part n").
//
// Content over the budget (chunk_token_num minus the header) is split: its
// units (paragraphs, code fences, lists, …) packed greedily, a unit over the
// budget by lines (a fence is re-wrapped in its fence lines, a table keeps its
// header rows in every part), a line over the budget by sentences —
// clustered by embedding similarity when opts.Embedder is set
// (clusterSentences), packed greedily otherwise — and a sentence over the
// budget hard-split. So unlike the original, which kept tables, lists and
// math whole whatever their size, no chunk exceeds chunk_token_num.
//
// Other differences from the original: paragraphs stay separated by a blank
// line (it joined them with "\n"); a fence keeps its language tag and a math
// block its "$$" lines; list items keep their source lines (nesting
// included) and lists get no "|bullet_list_open" suffix; HTML tables are not
// converted to key–value lines.
func splitSemantic(ctx context.Context, md string, cfg Config, emb Embedder) ([]piece, error) {
	b := &semantic{limit: cfg.ChunkTokenNum, emb: emb}
	blocks := scanBlocks(md)
	for i := 0; i < len(blocks) && b.err == nil; i++ {
		bl := blocks[i]
		switch bl.kind {
		case blockHeading:
			b.flush(ctx, "")
			b.stack[bl.level-1] = bl.title
			for j := bl.level; j < 6; j++ {
				b.stack[j] = ""
			}
		case blockTable:
			b.flush(ctx, "")
			b.table(bl)
		case blockParagraph:
			b.paragraph(ctx, bl)
		case blockFence, blockCode:
			b.cur = append(b.cur, bl)
		case blockList:
			b.cur = append(b.cur, bl)
			b.flush(ctx, "")
		case blockMath:
			b.cur = append(b.cur, bl)
			b.flush(ctx, "Math Block")
		case blockHTML:
			b.flush(ctx, "")
			b.cur = append(b.cur, bl)
			b.flush(ctx, "")
		}
	}
	b.flush(ctx, "")
	if b.err != nil {
		return nil, b.err
	}
	return b.out, nil
}

type semantic struct {
	limit int
	emb   Embedder
	stack [6]string
	cur   []block
	out   []piece
	err   error
}

// paragraph handles captioned images: "![…](…) 图1 …" in one paragraph, or
// an image paragraph followed by a caption paragraph, become a chunk of
// their own with the caption in the header.
func (b *semantic) paragraph(ctx context.Context, bl block) {
	text := bl.text()
	if loc := imagePrefixRe.FindStringIndex(text); loc != nil {
		if rest := strings.TrimSpace(text[loc[1]:]); rest != "" && captionRe.MatchString(rest) {
			b.flush(ctx, "")
			b.cur = append(b.cur, bl)
			b.flush(ctx, firstLine(rest))
			return
		}
	}
	if captionRe.MatchString(text) && len(b.cur) > 0 {
		last := b.cur[len(b.cur)-1]
		if last.kind == blockParagraph && imageOnlyRe.MatchString(last.text()) {
			b.cur = b.cur[:len(b.cur)-1]
			b.flush(ctx, "")
			b.cur = append(b.cur, last, bl)
			b.flush(ctx, firstLine(text))
			return
		}
	}
	b.cur = append(b.cur, bl)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}

// header builds the header line, shortening the heading path (outermost
// titles first, then the innermost title itself) and the special element so
// that the header, with a "|Part nnn" suffix, takes at most a quarter of the
// limit.
func (b *semantic) header(special string) (string, []string) {
	level := 1
	for i := 5; i >= 0; i-- {
		if b.stack[i] != "" {
			level = i + 1
			break
		}
	}
	path := nonEmpty(b.stack[:])
	headings := append([]string{}, path...)
	if len(path) == 0 && special == "" {
		return "", headings
	}
	maxTok := max(b.limit/4, 2)
	build := func() string {
		parts := append(append([]string(nil), path...), nonEmpty([]string{special})...)
		return strings.Repeat("#", level) + " " + strings.Join(parts, "|")
	}
	fits := func() bool { return CountTokens(build())+2 <= maxTok }
	for len(path) > 1 && !fits() {
		path = path[1:]
	}
	if !fits() && special != "" {
		special = truncateTokens(special, max(maxTok/4, 1))
	}
	if !fits() && len(path) == 1 {
		path[0] = truncateTokens(path[0], max(maxTok-2-CountTokens(special), 1))
	}
	return build(), headings
}

func truncateTokens(s string, n int) string {
	if p := hardSplit(s, n); len(p) > 0 {
		return p[0]
	}
	return s
}

// part is a piece of split content with the source lines it came from.
type part struct {
	text    string
	anchors []string
}

func (b *semantic) emit(header string, headings []string, parts []part, numbered bool) {
	for i, p := range parts {
		h := header
		if numbered && h != "" {
			h += fmt.Sprintf("|Part %d", i+1)
		}
		text, anchors := p.text, p.anchors
		if anchors == nil {
			anchors = strings.Split(p.text, "\n") // not the header
		}
		if h != "" {
			text = h + "\n" + p.text
		}
		b.out = append(b.out, piece{text: text, headings: headings, anchors: anchors})
	}
}

// flush turns the accumulated blocks into chunks.
func (b *semantic) flush(ctx context.Context, special string) {
	cur := b.cur
	b.cur = nil
	if b.err != nil || len(cur) == 0 {
		return
	}
	var texts []string
	for _, bl := range cur {
		if t := strings.TrimSpace(bl.text()); t != "" {
			texts = append(texts, t)
		}
	}
	content := strings.Join(texts, "\n\n")
	if content == "" {
		return
	}
	header, headings := b.header(special)
	if CountTokens(header)+CountTokens(content) <= b.limit {
		b.emit(header, headings, []part{{text: content}}, false)
		return
	}
	budget := max(b.limit-CountTokens(header)-2, 1)
	b.emit(header, headings, b.splitBlocks(ctx, cur, budget), true)
}

// table emits a table whole when it fits, else in parts of rows, each with
// the header and delimiter rows.
func (b *semantic) table(bl block) {
	header, headings := b.header("Table")
	content := bl.text()
	if CountTokens(header)+CountTokens(content) <= b.limit {
		b.emit(header, headings, []part{{text: content}}, false)
		return
	}
	budget := max(b.limit-CountTokens(header)-2, 1)
	b.emit(header, headings, tableParts(bl.lines, budget), true)
}

func tableParts(rows []string, budget int) []part {
	head := strings.Join(rows[:2], "\n")
	rowBudget := max(budget-CountTokens(head), 1)
	var out []part
	for _, chunk := range packLines(rows[2:], rowBudget, func(row string) []string { return hardSplit(row, rowBudget) }) {
		out = append(out, part{text: head + "\n" + chunk, anchors: strings.Split(chunk, "\n")})
	}
	return out
}

// splitBlocks packs blocks greedily into parts of at most budget tokens,
// splitting any block over the budget.
func (b *semantic) splitBlocks(ctx context.Context, blocks []block, budget int) []part {
	var out []part
	var cur []string
	tok := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, part{text: strings.Join(cur, "\n\n")})
			cur, tok = nil, 0
		}
	}
	for _, bl := range blocks {
		t := strings.TrimSpace(bl.text())
		if t == "" {
			continue
		}
		n := CountTokens(t)
		if n > budget {
			flush()
			out = append(out, b.splitBlock(ctx, bl, budget)...)
			continue
		}
		if tok+n > budget && len(cur) > 0 {
			flush()
		}
		cur = append(cur, t)
		tok += n
	}
	flush()
	return out
}

// splitBlock splits one block over the budget by lines.
func (b *semantic) splitBlock(ctx context.Context, bl block, budget int) []part {
	switch bl.kind {
	case blockTable:
		return tableParts(bl.lines, budget)
	case blockFence:
		open := bl.lines[0]
		inner := bl.lines[1:]
		fence, _ := fenceOpen(open)
		closing := fence // an unclosed fence gets a closing line in every part
		if len(inner) > 0 && isFenceClose(inner[len(inner)-1], fence) {
			closing = inner[len(inner)-1]
			inner = inner[:len(inner)-1]
		}
		innerBudget := max(budget-CountTokens(open)-CountTokens(closing), 1)
		var out []part
		for _, c := range packRawLines(inner, innerBudget) {
			out = append(out, part{text: open + "\n" + c + "\n" + closing, anchors: strings.Split(c, "\n")})
		}
		return out
	}
	var out []part
	for _, c := range packLines(bl.lines, budget, func(line string) []string { return b.sentences(ctx, line, budget) }) {
		out = append(out, part{text: c})
	}
	return out
}

// packRawLines packs code lines (indentation and blank lines kept) into
// pieces of at most budget tokens; a longer line is hard-split.
func packRawLines(ls []string, budget int) []string {
	var out, cur []string
	tok := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, "\n"))
			cur, tok = nil, 0
		}
	}
	for _, l := range ls {
		n := CountTokens(l)
		if n > budget {
			flush()
			out = append(out, hardSplit(l, budget)...)
			continue
		}
		if tok+n > budget && len(cur) > 0 {
			flush()
		}
		cur = append(cur, l)
		tok += n
	}
	flush()
	return out
}

func (b *semantic) sentences(ctx context.Context, line string, budget int) []string {
	if b.err != nil {
		return nil
	}
	out, err := clusterSentences(ctx, line, budget, b.emb)
	if err != nil {
		b.err = err
		return nil
	}
	return out
}
