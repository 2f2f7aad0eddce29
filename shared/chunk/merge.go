package chunk

import (
	"regexp"
	"sort"
	"strings"
)

// customDelimiterRe finds backtick-quoted custom delimiters, e.g. "`---`".
var customDelimiterRe = regexp.MustCompile("`([^`]+)`")

// lines splits on \n, \r\n and \r (Python's splitlines also splits on \v, \f
// and a few Unicode separators, which Markdown does not use as line ends).
func lines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

// trimmedLines are the non-blank lines of s, trimmed.
func trimmedLines(s string) []string {
	var out []string
	for _, l := range lines(s) {
		if t := strings.TrimSpace(l); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// customDelimiters returns the backtick-quoted delimiters in delimiter.
func customDelimiters(delimiter string) []string {
	var out []string
	for _, m := range customDelimiterRe.FindAllStringSubmatch(delimiter, -1) {
		out = append(out, m[1])
	}
	return out
}

// splitOnDelimiters splits text on any of delims (longest first at a tie),
// dropping the delimiters and blank parts.
func splitOnDelimiters(text string, delims []string) []string {
	ds := append([]string(nil), delims...)
	sort.SliceStable(ds, func(i, j int) bool { return len(ds[i]) > len(ds[j]) })
	quoted := make([]string, len(ds))
	for i, d := range ds {
		quoted[i] = regexp.QuoteMeta(d)
	}
	re := regexp.MustCompile(strings.Join(quoted, "|"))
	var out []string
	for _, part := range re.Split(text, -1) {
		if t := strings.TrimSpace(part); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// sections splits a document the way general and separator do: by the
// delimiter, or line by line when the delimiter is a newline (or holds
// backticks, whose custom delimiters the callers handle themselves).
func sections(md, delimiter string) []string {
	var out []string
	if delimiter != "" && delimiter != "\n" && delimiter != "\r\n" && !strings.Contains(delimiter, "`") {
		for _, part := range strings.Split(md, delimiter) {
			if t := strings.TrimSpace(part); t != "" {
				out = append(out, t)
			}
		}
		return out
	}
	return trimmedLines(md)
}

// naiveMerge is the original's naive_merge: sections are appended ("\n"
// between) to the current chunk until its token count exceeds
// limit×(100-overlap)/100; the next section then starts a new chunk, prefixed
// with the last overlap% characters of the previous chunk. A chunk therefore
// overshoots the threshold by at most one section (plus the prefix).
func naiveMerge(secs []string, limit, overlap int) []string {
	if len(secs) == 0 {
		return nil
	}
	overlap = max(0, min(overlap, 99))
	threshold := float64(limit) * float64(100-overlap) / 100
	chunks := []string{""}
	tokens := []int{0}
	for _, sec := range secs {
		if sec == "" {
			continue
		}
		text := "\n" + sec
		n := CountTokens(text)
		last := len(chunks) - 1
		if chunks[last] == "" || float64(tokens[last]) > threshold {
			if overlap > 0 && chunks[last] != "" {
				prev := []rune(chunks[last])
				from := int(float64(len(prev)) * float64(100-overlap) / 100)
				text = string(prev[from:]) + text
			}
			chunks = append(chunks, text)
			tokens = append(tokens, n)
			continue
		}
		chunks[last] += text
		tokens[last] += n
	}
	var out []string
	for _, c := range chunks {
		if t := strings.TrimSpace(c); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// boundedMerge merges sections (joined by sep) like naiveMerge, but a chunk
// never grows past limit: the section that would overflow starts the next
// chunk, prefixed with the last overlap% characters of the previous chunk
// when the two still fit. A section over limit on its own stays whole, for
// the caller to split further. Book and laws use it where the original used
// naive_merge and then re-split what overshot, so their chunks end at line
// or sentence boundaries instead of being hard-split.
func boundedMerge(secs []string, limit, overlap int, sep string) []string {
	overlap = max(0, min(overlap, 99))
	var out []string
	cur, curTok := "", 0
	for _, sec := range secs {
		if strings.TrimSpace(sec) == "" {
			continue
		}
		n := CountTokens(sec)
		if cur != "" && curTok+n > limit {
			out = append(out, cur)
			prefix := ""
			if overlap > 0 {
				r := []rune(cur)
				prefix = string(r[len(r)*(100-overlap)/100:])
			}
			if pt := CountTokens(prefix); prefix != "" && pt+n <= limit {
				cur, curTok = prefix+sep+sec, pt+n
			} else {
				cur, curTok = sec, n
			}
			continue
		}
		if cur == "" {
			cur = sec
		} else {
			cur += sep + sec
		}
		curTok += n
	}
	if cur != "" {
		out = append(out, cur)
	}
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// packLines packs lines greedily into chunks of at most limit tokens (joined
// with "\n", indentation kept, blank lines dropped); a line over the limit
// goes through long, whose pieces stand alone.
func packLines(ls []string, limit int, long func(string) []string) []string {
	var out, cur []string
	curTok := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, "\n"))
			cur, curTok = nil, 0
		}
	}
	for _, l := range ls {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			continue
		}
		n := CountTokens(l)
		if n > limit {
			flush()
			out = append(out, long(strings.TrimSpace(l))...)
			continue
		}
		if curTok+n > limit && len(cur) > 0 {
			flush()
		}
		cur = append(cur, l)
		curTok += n
	}
	flush()
	return out
}

// fitTokens makes text fit limit: as is when it does, else its lines packed,
// over-long lines by sentences, over-long sentences hard-split.
func fitTokens(text string, limit int) []string {
	if CountTokens(text) <= limit {
		if t := strings.TrimSpace(text); t != "" {
			return []string{t}
		}
		return nil
	}
	return packLines(lines(text), limit, func(line string) []string {
		return packSentences(line, splitSentences(line), limit)
	})
}

// splitAfterAny splits s after each rune in cut, keeping it with the text
// before; the pieces concatenate back to s.
func splitAfterAny(s, cut string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if strings.ContainsRune(cut, r) {
			end := i + len(string(r))
			out = append(out, s[start:end])
			start = end
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
