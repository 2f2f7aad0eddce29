package chunk

import "strings"

// splitBook is the book preset: non-empty lines, the table of contents
// removed, the dominant heading pattern group detected (Markdown '#',
// numeric "1." / "1.1", Chinese 第X章/第X节/第X条, 一、, English Chapter…);
// with one, hierarchicalMerge (depth 5) prefixes every chunk with its heading
// path; without one, lines are merged up to the limit (boundedMerge, with
// overlap). Chunks over chunk_token_num are re-split by
// lines, then sentences, then hard-split (the original only hard-split in
// its spec; the shipped parser did not limit book chunks at all).
func splitBook(md string, cfg Config) []piece {
	n := cfg.ChunkTokenNum
	secs := trimmedLines(md)
	if len(secs) == 0 {
		return nil
	}
	secs = removeContentsTable(secs, isEnglish(secs))
	var ms []merged
	code := fencedLines(secs)
	if g := bulletsCategory(secs, code); g >= 0 {
		ms = hierarchicalMerge(bulletGroups()[g], secs, code, 5, n)
	}
	hierarchical := len(ms) > 0
	if !hierarchical {
		for _, c := range boundedMerge(secs, n, cfg.OverlappedPercent, "\n") {
			ms = append(ms, merged{lines: []string{c}})
		}
	}
	var out []piece
	for _, m := range ms {
		text := strings.Join(m.lines, "\n")
		headings := m.headings
		if hierarchical && headings == nil {
			headings = []string{} // known: none (not derived from '#' lines)
		}
		pieces := fitTokens(text, n)
		for _, p := range pieces {
			pc := piece{text: p, headings: headings}
			if len(pieces) == 1 {
				pc.anchors = m.anchors
			}
			out = append(out, pc)
		}
	}
	return out
}
