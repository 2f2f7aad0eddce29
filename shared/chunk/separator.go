package chunk

// splitSeparator is the separator preset: every delimiter-separated section
// (every non-empty line for a newline delimiter; the parts between custom
// backtick-quoted delimiters when there are any) is its own chunk. Only a
// section over chunk_token_num is cut, into windows of at most
// chunk_token_num tokens overlapping by overlapped_percent of that.
func splitSeparator(md string, cfg Config) []piece {
	n := cfg.ChunkTokenNum
	var secs []string
	if custom := customDelimiters(cfg.Delimiter); len(custom) > 0 {
		secs = splitOnDelimiters(md, custom)
	} else {
		secs = sections(md, cfg.Delimiter)
	}
	overlap := n * cfg.OverlappedPercent / 100
	var out []piece
	for _, s := range secs {
		for _, w := range slideTokens(s, n, overlap) {
			out = append(out, piece{text: w})
		}
	}
	return out
}
