package keyword

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// latin1Fold maps U+00C0–U+00FF to a base letter: '.' keeps the rune
// (× and ÷), '*' means a two-letter expansion (see foldSpecial).
const latin1Fold = "aaaaaa*ceeeeiiiidnooooo.ouuuuy**aaaaaa*ceeeeiiiidnooooo.ouuuuy*y"

// latinExtAFold maps U+0100–U+017F (upper and lower case alike) to a base
// letter; '*' means a two-letter expansion (see foldSpecial).
const latinExtAFold = "aaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiii**jjkkkllllllllllnnnnnnnnnoooooo**rrrrrrssssssssttttttuuuuuuuuuuuuwwyyyzzzzzzs"

func foldSpecial(r rune) string {
	switch r {
	case 'Æ', 'æ':
		return "ae"
	case 'Þ', 'þ':
		return "th"
	case 'ß':
		return "ss"
	case 'Ĳ', 'ĳ':
		return "ij"
	case 'Œ', 'œ':
		return "oe"
	}
	return ""
}

// fold lower-cases text and applies the folds described at NewAnalyzer.
func fold(text string) string {
	ascii := true
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(text)
	}
	var b strings.Builder
	b.Grow(len(text))
	for _, r := range text {
		switch {
		case r < utf8.RuneSelf:
			if r >= 'A' && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
		case r >= 0xC0 && r <= 0x17F:
			var c byte
			if r <= 0xFF {
				c = latin1Fold[r-0xC0]
			} else {
				c = latinExtAFold[r-0x100]
			}
			switch c {
			case '.':
				b.WriteRune(r)
			case '*':
				b.WriteString(foldSpecial(r))
			default:
				b.WriteByte(c)
			}
		case r >= 0x300 && r <= 0x36F:
			// Combining diacritical marks: dropped, so that decomposed and
			// precomposed accented letters fold alike.
		case r >= 0xFF01 && r <= 0xFF5E:
			// Full-width ASCII (common in Chinese and Japanese text).
			c := byte(r - 0xFEE0)
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		case r == 0x3000:
			b.WriteByte(' ')
		case r == 0xB5:
			b.WriteRune('μ')
		case r == 0xB2 || r == 0xB3:
			b.WriteByte(byte('2' + r - 0xB2))
		case r == 0xB9:
			b.WriteByte('1')
		case r >= 0x2070 && r <= 0x2079 && r != 0x2071 && r != 0x2072 && r != 0x2073:
			b.WriteByte(byte('0' + r - 0x2070))
		case r >= 0x2080 && r <= 0x2089:
			b.WriteByte(byte('0' + r - 0x2080))
		case r >= 0xFB00 && r <= 0xFB06:
			b.WriteString([...]string{"ff", "fi", "fl", "ffi", "ffl", "st", "st"}[r-0xFB00])
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
