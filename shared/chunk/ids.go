package chunk

import "strconv"

// ChunkIDs gives each chunk a stable id derived from the file id and the
// chunk's content, not its position: fileID + "_" + the first 16 hex digits
// of the content's SHA-256, plus "_<n>" for the n-th (n ≥ 2) repetition of
// the same content within the file. Re-chunking unchanged text yields the
// same ids even when chunks were inserted before it, so callers re-embed only
// new content. (The original used fileID + "_chunk_" + position.)
func ChunkIDs(fileID string, chunks []Chunk) []string {
	ids := make([]string, len(chunks))
	seen := make(map[string]int, len(chunks))
	for i, c := range chunks {
		h := c.ContentHash
		if len(h) < 16 {
			h = hashHex(c.Content)
		}
		key := h[:16]
		seen[key]++
		ids[i] = fileID + "_" + key
		if n := seen[key]; n > 1 {
			ids[i] += "_" + strconv.Itoa(n)
		}
	}
	return ids
}
