package pdf

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// normalizeText cleans the text of one glyph, once per font code (not per
// glyph): ligatures become their letters, control and zero-width characters
// are dropped, the many Unicode spaces become ' '. The soft hyphen is kept
// for the line assembler, which turns it into a join or drops it.
func normalizeText(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 0xfb00 && r <= 0xfb06:
			b.WriteString([...]string{"ff", "fi", "fl", "ffi", "ffl", "st", "st"}[r-0xfb00])
		case r == '\t' || r == '\n' || r == '\r' || r == 0xa0 || r == 0x3000 || r == 0x202f || r == 0x205f || (r >= 0x2000 && r <= 0x200a):
			b.WriteByte(' ')
		case r < 0x20 || (r >= 0x7f && r < 0xa0):
		case r == 0x200b || r == 0x200c || r == 0x200d || r == 0x2060 || r == 0xfeff || r == utf8.RuneError:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isCJK reports whether r belongs to a script written without spaces
// between words (Han, kana, Hangul syllables, CJK punctuation, full-width
// forms); no space is inserted between two such characters.
func isCJK(r rune) bool {
	switch {
	case r < 0x2e80:
		return false
	case r <= 0x9fff, // radicals, CJK punctuation, kana, Han
		r >= 0xac00 && r <= 0xd7af, // Hangul syllables
		r >= 0xf900 && r <= 0xfaff, // compatibility ideographs
		r >= 0xfe30 && r <= 0xfe4f, // compatibility forms
		r >= 0xff00 && r <= 0xffef, // half- and full-width forms
		r >= 0x20000 && r <= 0x3ffff:
		return true
	}
	return false
}

func lastRune(b []byte) rune {
	r, _ := utf8.DecodeLastRune(b)
	return r
}

func firstRune(b []byte) rune {
	r, _ := utf8.DecodeRune(b)
	return r
}

// hyphenated reports whether line ends in a hyphen that splits a word: a
// hyphen (or soft hyphen) right after a lower-case letter. It returns the
// line without the hyphen.
func hyphenated(line []byte) ([]byte, bool) {
	r, n := utf8.DecodeLastRune(line)
	if r != '-' && r != 0xad && r != 0x2010 {
		return line, false
	}
	rest := line[:len(line)-n]
	prev, _ := utf8.DecodeLastRune(rest)
	if !unicode.IsLower(prev) {
		return line, false
	}
	return rest, true
}
