package chunk

import (
	"regexp"
	"strings"
)

var (
	articleRe     = regexp.MustCompile(`^(第[零一二三四五六七八九十百千万0-9]+条)[\s　:：]*(.*)$`)
	lawHeadingRe  = regexp.MustCompile(`^#{1,6}\s+`)
	lawListRe     = regexp.MustCompile(`^[-*+]\s+`)
	lawSpacesRe   = regexp.MustCompile(`[ \t]+`)
	docxHeadingRe = regexp.MustCompile(`^(#{1,6})\s+(.*)$`)
)

// lawSentenceEnd ends a sentence when over-long articles are re-split.
const lawSentenceEnd = "。！？；;!?"

// normalizeLawLine strips the Markdown decoration (#, list markers, **, __,
// backticks) that would hide 第X条 from the pattern matcher.
func normalizeLawLine(line string) string {
	t := strings.TrimSpace(line)
	t = lawHeadingRe.ReplaceAllString(t, "")
	t = lawListRe.ReplaceAllString(t, "")
	t = strings.NewReplacer("**", "", "__", "", "`", "").Replace(t)
	t = lawSpacesRe.ReplaceAllString(t, " ")
	return strings.TrimSpace(t)
}

// lawSections normalises every line and splits "第X条 body" into the article
// title and its body, so that the title is a heading of its own.
func lawSections(md string) []string {
	var out []string
	for _, l := range trimmedLines(md) {
		t := normalizeLawLine(l)
		if t == "" {
			continue
		}
		m := articleRe.FindStringSubmatch(t)
		if m == nil {
			out = append(out, t)
			continue
		}
		out = append(out, strings.TrimSpace(m[1]))
		if body := strings.TrimSpace(m[2]); body != "" {
			out = append(out, body)
		}
	}
	return out
}

// splitLaws is the laws preset. For .docx the Markdown heading tree is used
// when it gives more than one chunk. Otherwise: normalised sections, the
// table of contents removed, the heading group detected (a Markdown group is
// replaced by the Chinese law group), treeMerge at depth 3 (章/节/条: every
// article a chunk with its chapter and section lines); without any heading
// group, lines are merged up to the limit (the original's tree_merge then
// returned every line as a chunk). Over-long chunks are re-merged by lines, then by sentences, then
// hard-split, so no chunk exceeds chunk_token_num.
func splitLaws(md string, cfg Config, filename string) []piece {
	n := cfg.ChunkTokenNum
	if strings.HasSuffix(strings.ToLower(filename), ".docx") {
		if ms := docxHeadingTree(md); len(ms) > 1 {
			return enforceLawLimit(ms, n, cfg.OverlappedPercent)
		}
	}
	secs := lawSections(md)
	if len(secs) == 0 {
		return nil
	}
	secs = removeContentsTable(secs, isEnglish(secs))
	g := bulletsCategory(secs, nil)
	if g == groupMarkdown {
		g = groupChineseLaw
	}
	var ms []merged
	if g >= 0 {
		ms = treeMerge(bulletGroups()[g], secs, 3)
	}
	if len(ms) == 0 {
		for _, c := range boundedMerge(secs, n, cfg.OverlappedPercent, "\n") {
			ms = append(ms, merged{lines: []string{c}})
		}
	}
	return enforceLawLimit(ms, n, cfg.OverlappedPercent)
}

// docxHeadingTree builds the tree from Markdown heading levels (body = 99),
// cut at the second level present (or the second deepest, when the second is
// the deepest of three or more).
func docxHeadingTree(md string) []merged {
	var ls []leveled
	levelSet := map[int]bool{}
	for _, l := range trimmedLines(md) {
		level, value := 99, l
		if m := docxHeadingRe.FindStringSubmatch(l); m != nil {
			level, value = len(m[1]), strings.TrimSpace(m[2])
		}
		if value == "" {
			continue
		}
		ls = append(ls, leveled{level, value})
		levelSet[level] = true
	}
	if len(ls) == 0 {
		return nil
	}
	var sorted []int
	for l := 1; l <= 99; l++ {
		if levelSet[l] {
			sorted = append(sorted, l)
		}
	}
	h2 := 1
	if len(sorted) > 1 {
		h2 = sorted[1]
	}
	if h2 == sorted[len(sorted)-1] && len(sorted) > 2 {
		h2 = sorted[len(sorted)-2]
	}
	return buildTree(ls, h2).flatten()
}

// enforceLawLimit is the original's _ensure_chunk_token_limit: a chunk over
// the limit is re-merged by lines, a line group still over it by sentences
// (after 。！？；;!?), and what is still over it hard-split; pieces keep the
// chunk's heading path.
func enforceLawLimit(ms []merged, n, overlap int) []piece {
	var out []piece
	for _, m := range ms {
		text := strings.TrimSpace(strings.Join(m.lines, "\n"))
		if text == "" {
			continue
		}
		headings := m.headings // nil (no heading path known): derived from '#' lines
		if CountTokens(text) <= n {
			out = append(out, piece{text: text, headings: headings, anchors: m.anchors})
			continue
		}
		refined := boundedMerge(trimmedLines(text), n, overlap, "\n")
		if len(refined) == 0 {
			refined = []string{text}
		}
		for _, item := range refined {
			if CountTokens(item) <= n {
				out = append(out, piece{text: item, headings: headings})
				continue
			}
			sentences := boundedMerge(splitAfterAny(item, lawSentenceEnd), n, overlap, "")
			if len(sentences) == 0 {
				sentences = []string{item}
			}
			for _, s := range sentences {
				if CountTokens(s) <= n {
					out = append(out, piece{text: s, headings: headings})
					continue
				}
				for _, h := range hardSplit(s, n) {
					out = append(out, piece{text: h, headings: headings})
				}
			}
		}
	}
	return out
}
