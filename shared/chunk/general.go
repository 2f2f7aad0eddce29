package chunk

// generalHardLimitRatio: general chunks up to 1.5× chunk_token_num are kept
// (naive merge overshoots by up to one section); longer ones are hard-split
// into chunk_token_num pieces (the original's GENERAL_HARD_LIMIT_RATIO).
const generalHardLimitRatio = 1.5

// splitGeneral is the general preset (the original's "naive" parser):
// sections by delimiter (one per non-empty line for a newline delimiter),
// merged by naiveMerge with overlap. With backtick-quoted custom delimiters
// ("`---`") the whole text is split strictly on them and nothing is merged
// (the original split each line on them, making every line a chunk).
func splitGeneral(md string, cfg Config) []piece {
	n := cfg.ChunkTokenNum
	var chunks []string
	if custom := customDelimiters(cfg.Delimiter); len(custom) > 0 {
		chunks = splitOnDelimiters(md, custom)
	} else {
		chunks = naiveMerge(sections(md, cfg.Delimiter), n, cfg.OverlappedPercent)
	}
	hard := int(float64(n) * generalHardLimitRatio)
	var out []piece
	for _, c := range chunks {
		if CountTokens(c) > hard {
			for _, p := range hardSplit(c, n) {
				out = append(out, piece{text: p})
			}
			continue
		}
		out = append(out, piece{text: c})
	}
	return out
}
