package chunk

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// CountTokens approximates a token count as the original does (nlp.count_tokens):
// the number of [A-Za-z0-9_]+ runs plus one per CJK character (Han, Hiragana,
// Katakana, Hangul). Punctuation, spaces and other scripts count nothing, so
// a punctuation-only string is 0 (the original returned at least 1 for any
// non-blank string).
func CountTokens(s string) int {
	n := 0
	inWord := false
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			w := isWordByte(b)
			if w && !inWord {
				n++
			}
			inWord = w
			i++
			continue
		}
		inWord = false
		r, size := utf8.DecodeRuneInString(s[i:])
		if isCJK(r) {
			n++
		}
		i += size
	}
	return n
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}

func isCJK(r rune) bool {
	return r >= 0x1100 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// span is a byte range [start, end).
type span struct{ start, end int }

// tokenSpans lists the tokens CountTokens counts, as byte ranges of s.
func tokenSpans(s string) []span {
	var out []span
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if !isWordByte(b) {
				i++
				continue
			}
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			out = append(out, span{i, j})
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if isCJK(r) {
			out = append(out, span{i, i + size})
		}
		i += size
	}
	return out
}

// hardSplit cuts text into pieces of at most limit tokens, at token starts:
// text between two tokens (spaces, punctuation) stays with the token before
// it, so no piece begins with a dangling "。" (the original cut right after
// the last token and could emit a punctuation-only tail piece).
func hardSplit(text string, limit int) []string {
	return slideTokens(text, limit, 0)
}

// slideTokens cuts text into windows of at most limit tokens; each window
// after the first starts overlap tokens before the previous one ended.
// Windows end at token boundaries, so words are never cut (the original
// separator sliced character by character and could cut a word in two).
func slideTokens(text string, limit, overlap int) []string {
	limit = max(limit, 1)
	overlap = max(0, min(overlap, limit-1))
	spans := tokenSpans(text)
	if len(spans) <= limit {
		if t := strings.TrimSpace(text); t != "" {
			return []string{t}
		}
		return nil
	}
	var out []string
	for first := 0; ; {
		last := first + limit // exclusive
		from, to := 0, len(text)
		if first > 0 {
			from = spans[first].start
		}
		if last < len(spans) {
			to = spans[last].start
		}
		if t := strings.TrimSpace(text[from:to]); t != "" {
			out = append(out, t)
		}
		if last >= len(spans) {
			return out
		}
		first = max(last-overlap, first+1)
	}
}
