package pdf

import (
	"strconv"
	"strings"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/unicode/norm"
)

// Simple-font encodings and glyph names. Tables are functions (switches)
// rather than package variables: the package keeps no global state.

// Base encodings of simple fonts.
const (
	encStandard = iota
	encWinAnsi
	encMacRoman
	encPDFDoc
	encSymbol // a symbolic font without an encoding: guess Latin for ASCII
)

// baseRune returns the character of code b in a base encoding, 0 if none.
func baseRune(enc int, b byte) rune {
	switch enc {
	case encWinAnsi, encSymbol:
		if b < 0x20 {
			return 0
		}
		if b == 0x7f {
			return 0x2022 // WinAnsi puts a bullet on unused codes
		}
		return charmap.Windows1252.DecodeByte(b)
	case encMacRoman:
		if b < 0x20 || b == 0x7f {
			return 0
		}
		return charmap.Macintosh.DecodeByte(b)
	case encPDFDoc:
		return pdfDocRune(b)
	}
	return standardRune(b)
}

func pdfDocRune(b byte) rune {
	switch b {
	case 0x18:
		return 0x02d8
	case 0x19:
		return 0x02c7
	case 0x1a:
		return 0x02c6
	case 0x1b:
		return 0x02d9
	case 0x1c:
		return 0x02dd
	case 0x1d:
		return 0x02db
	case 0x1e:
		return 0x02da
	case 0x1f:
		return 0x02dc
	case 0x80:
		return 0x2022
	case 0x81:
		return 0x2020
	case 0x82:
		return 0x2021
	case 0x83:
		return 0x2026
	case 0x84:
		return 0x2014
	case 0x85:
		return 0x2013
	case 0x86:
		return 0x0192
	case 0x87:
		return 0x2044
	case 0x88:
		return 0x2039
	case 0x89:
		return 0x203a
	case 0x8a:
		return 0x2212
	case 0x8b:
		return 0x2030
	case 0x8c:
		return 0x201e
	case 0x8d:
		return 0x201c
	case 0x8e:
		return 0x201d
	case 0x8f:
		return 0x2018
	case 0x90:
		return 0x2019
	case 0x91:
		return 0x201a
	case 0x92:
		return 0x2122
	case 0x93:
		return 0xfb01
	case 0x94:
		return 0xfb02
	case 0x95:
		return 0x0141
	case 0x96:
		return 0x0152
	case 0x97:
		return 0x0160
	case 0x98:
		return 0x0178
	case 0x99:
		return 0x017d
	case 0x9a:
		return 0x0131
	case 0x9b:
		return 0x0142
	case 0x9c:
		return 0x0153
	case 0x9d:
		return 0x0161
	case 0x9e:
		return 0x017e
	case 0xa0:
		return 0x20ac
	}
	if b < 0x20 || (b >= 0x7f && b < 0xa0) {
		return 0
	}
	return rune(b)
}

// standardRune is Adobe StandardEncoding, the default of Type 1 fonts.
func standardRune(b byte) rune {
	switch b {
	case 0x27:
		return 0x2019
	case 0x60:
		return 0x2018
	case 0xa1:
		return 0xa1
	case 0xa2:
		return 0xa2
	case 0xa3:
		return 0xa3
	case 0xa4:
		return 0x2044
	case 0xa5:
		return 0xa5
	case 0xa6:
		return 0x0192
	case 0xa7:
		return 0xa7
	case 0xa8:
		return 0xa4
	case 0xa9:
		return '\''
	case 0xaa:
		return 0x201c
	case 0xab:
		return 0xab
	case 0xac:
		return 0x2039
	case 0xad:
		return 0x203a
	case 0xae:
		return 0xfb01
	case 0xaf:
		return 0xfb02
	case 0xb1:
		return 0x2013
	case 0xb2:
		return 0x2020
	case 0xb3:
		return 0x2021
	case 0xb4:
		return 0xb7
	case 0xb6:
		return 0xb6
	case 0xb7:
		return 0x2022
	case 0xb8:
		return 0x201a
	case 0xb9:
		return 0x201e
	case 0xba:
		return 0x201d
	case 0xbb:
		return 0xbb
	case 0xbc:
		return 0x2026
	case 0xbd:
		return 0x2030
	case 0xbf:
		return 0xbf
	case 0xc1:
		return '`'
	case 0xc2:
		return 0xb4
	case 0xc3:
		return 0x02c6
	case 0xc4:
		return 0x02dc
	case 0xc5:
		return 0xaf
	case 0xc6:
		return 0x02d8
	case 0xc7:
		return 0x02d9
	case 0xc8:
		return 0xa8
	case 0xca:
		return 0x02da
	case 0xcb:
		return 0xb8
	case 0xcd:
		return 0x02dd
	case 0xce:
		return 0x02db
	case 0xcf:
		return 0x02c7
	case 0xd0:
		return 0x2014
	case 0xe1:
		return 0xc6
	case 0xe3:
		return 0xaa
	case 0xe8:
		return 0x0141
	case 0xe9:
		return 0xd8
	case 0xea:
		return 0x0152
	case 0xeb:
		return 0xba
	case 0xf1:
		return 0xe6
	case 0xf5:
		return 0x0131
	case 0xf8:
		return 0x0142
	case 0xf9:
		return 0xf8
	case 0xfa:
		return 0x0153
	case 0xfb:
		return 0xdf
	}
	if b >= 0x20 && b < 0x7f {
		return rune(b)
	}
	return 0
}

// accentMark maps the accent part of a glyph name ("acute" in "eacute") to
// its combining character.
func accentMark(s string) rune {
	switch s {
	case "grave":
		return 0x300
	case "acute":
		return 0x301
	case "circumflex":
		return 0x302
	case "tilde":
		return 0x303
	case "macron":
		return 0x304
	case "breve":
		return 0x306
	case "dotaccent":
		return 0x307
	case "dieresis":
		return 0x308
	case "ring":
		return 0x30a
	case "hungarumlaut":
		return 0x30b
	case "caron":
		return 0x30c
	case "commaaccent":
		return 0x326
	case "cedilla":
		return 0x327
	case "ogonek":
		return 0x328
	}
	return 0
}

// glyphNameText maps a glyph name (Adobe Glyph List conventions, for the
// names that occur in Latin, Greek and symbol text) to its text.
func glyphNameText(name string) (string, bool) {
	if name == "" || name[0] == '.' {
		return "", false
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i] // "a.sc", "one.oldstyle"
	}
	if strings.IndexByte(name, '_') > 0 { // "f_i": a ligature of components
		var b strings.Builder
		for _, part := range strings.Split(name, "_") {
			s, ok := glyphNameText(part)
			if !ok {
				return "", false
			}
			b.WriteString(s)
		}
		return b.String(), true
	}
	if len(name) == 1 {
		c := name[0]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return name, true
		}
		return "", false
	}
	if r := namedRune(name); r != 0 {
		return string(r), true
	}
	if strings.HasPrefix(name, "uni") && len(name) >= 7 && (len(name)-3)%4 == 0 {
		var b strings.Builder
		for i := 3; i < len(name); i += 4 {
			v, err := strconv.ParseUint(name[i:i+4], 16, 32)
			if err != nil {
				return "", false
			}
			b.WriteRune(rune(v))
		}
		return b.String(), true
	}
	if name[0] == 'u' && len(name) >= 5 && len(name) <= 7 {
		if v, err := strconv.ParseUint(name[1:], 16, 32); err == nil && v <= 0x10ffff {
			return string(rune(v)), true
		}
	}
	// "eacute", "Scaron", "zdotaccent": a letter and an accent.
	if c := name[0]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		if m := accentMark(name[1:]); m != 0 {
			return norm.NFC.String(string([]rune{rune(c), m})), true
		}
	}
	return "", false
}

// namedRune covers the glyph names that are not a letter, not "uniXXXX" and
// not a letter with an accent.
func namedRune(n string) rune {
	switch n {
	case "space", "nbspace", "nonbreakingspace":
		return ' '
	case "exclam":
		return '!'
	case "quotedbl":
		return '"'
	case "numbersign":
		return '#'
	case "dollar":
		return '$'
	case "percent":
		return '%'
	case "ampersand":
		return '&'
	case "quotesingle":
		return '\''
	case "parenleft":
		return '('
	case "parenright":
		return ')'
	case "asterisk":
		return '*'
	case "plus":
		return '+'
	case "comma":
		return ','
	case "hyphen", "sfthyphen":
		return '-'
	case "period":
		return '.'
	case "slash":
		return '/'
	case "zero":
		return '0'
	case "one":
		return '1'
	case "two":
		return '2'
	case "three":
		return '3'
	case "four":
		return '4'
	case "five":
		return '5'
	case "six":
		return '6'
	case "seven":
		return '7'
	case "eight":
		return '8'
	case "nine":
		return '9'
	case "colon":
		return ':'
	case "semicolon":
		return ';'
	case "less":
		return '<'
	case "equal":
		return '='
	case "greater":
		return '>'
	case "question":
		return '?'
	case "at":
		return '@'
	case "bracketleft":
		return '['
	case "backslash":
		return '\\'
	case "bracketright":
		return ']'
	case "asciicircum":
		return '^'
	case "underscore":
		return '_'
	case "grave":
		return '`'
	case "braceleft":
		return '{'
	case "bar":
		return '|'
	case "braceright":
		return '}'
	case "asciitilde":
		return '~'
	case "exclamdown":
		return 0xa1
	case "cent":
		return 0xa2
	case "sterling":
		return 0xa3
	case "currency":
		return 0xa4
	case "yen":
		return 0xa5
	case "brokenbar":
		return 0xa6
	case "section":
		return 0xa7
	case "dieresis":
		return 0xa8
	case "copyright":
		return 0xa9
	case "ordfeminine":
		return 0xaa
	case "guillemotleft", "guillemetleft":
		return 0xab
	case "logicalnot":
		return 0xac
	case "registered":
		return 0xae
	case "macron":
		return 0xaf
	case "degree":
		return 0xb0
	case "plusminus":
		return 0xb1
	case "twosuperior":
		return 0xb2
	case "threesuperior":
		return 0xb3
	case "acute":
		return 0xb4
	case "mu", "mu1":
		return 0xb5
	case "paragraph":
		return 0xb6
	case "periodcentered", "middot":
		return 0xb7
	case "cedilla":
		return 0xb8
	case "onesuperior":
		return 0xb9
	case "ordmasculine":
		return 0xba
	case "guillemotright", "guillemetright":
		return 0xbb
	case "onequarter":
		return 0xbc
	case "onehalf":
		return 0xbd
	case "threequarters":
		return 0xbe
	case "questiondown":
		return 0xbf
	case "AE":
		return 0xc6
	case "Eth":
		return 0xd0
	case "multiply":
		return 0xd7
	case "Oslash":
		return 0xd8
	case "Thorn":
		return 0xde
	case "germandbls":
		return 0xdf
	case "ae":
		return 0xe6
	case "eth":
		return 0xf0
	case "divide":
		return 0xf7
	case "oslash":
		return 0xf8
	case "thorn":
		return 0xfe
	case "dotlessi":
		return 0x131
	case "dotlessj":
		return 0x237
	case "Lslash":
		return 0x141
	case "lslash":
		return 0x142
	case "OE":
		return 0x152
	case "oe":
		return 0x153
	case "florin":
		return 0x192
	case "circumflex":
		return 0x2c6
	case "caron":
		return 0x2c7
	case "breve":
		return 0x2d8
	case "dotaccent":
		return 0x2d9
	case "ring":
		return 0x2da
	case "ogonek":
		return 0x2db
	case "tilde":
		return 0x2dc
	case "hungarumlaut":
		return 0x2dd
	case "endash":
		return 0x2013
	case "emdash":
		return 0x2014
	case "quoteleft":
		return 0x2018
	case "quoteright":
		return 0x2019
	case "quotesinglbase":
		return 0x201a
	case "quotedblleft":
		return 0x201c
	case "quotedblright":
		return 0x201d
	case "quotedblbase":
		return 0x201e
	case "dagger":
		return 0x2020
	case "daggerdbl":
		return 0x2021
	case "bullet":
		return 0x2022
	case "ellipsis":
		return 0x2026
	case "perthousand":
		return 0x2030
	case "minute":
		return 0x2032
	case "second":
		return 0x2033
	case "guilsinglleft":
		return 0x2039
	case "guilsinglright":
		return 0x203a
	case "fraction":
		return 0x2044
	case "Euro", "euro":
		return 0x20ac
	case "trademark":
		return 0x2122
	case "arrowleft":
		return 0x2190
	case "arrowup":
		return 0x2191
	case "arrowright":
		return 0x2192
	case "arrowdown":
		return 0x2193
	case "arrowboth":
		return 0x2194
	case "arrowdblright":
		return 0x21d2
	case "arrowdblboth":
		return 0x21d4
	case "universal":
		return 0x2200
	case "partialdiff":
		return 0x2202
	case "existential":
		return 0x2203
	case "emptyset":
		return 0x2205
	case "gradient", "nabla":
		return 0x2207
	case "element":
		return 0x2208
	case "suchthat":
		return 0x220b
	case "product":
		return 0x220f
	case "summation":
		return 0x2211
	case "minus":
		return 0x2212
	case "asteriskmath":
		return 0x2217
	case "radical":
		return 0x221a
	case "proportional":
		return 0x221d
	case "infinity":
		return 0x221e
	case "angle":
		return 0x2220
	case "logicaland":
		return 0x2227
	case "logicalor":
		return 0x2228
	case "intersection":
		return 0x2229
	case "union":
		return 0x222a
	case "integral":
		return 0x222b
	case "therefore":
		return 0x2234
	case "similar":
		return 0x223c
	case "congruent":
		return 0x2245
	case "approxequal":
		return 0x2248
	case "notequal":
		return 0x2260
	case "equivalence":
		return 0x2261
	case "lessequal":
		return 0x2264
	case "greaterequal":
		return 0x2265
	case "propersubset":
		return 0x2282
	case "propersuperset":
		return 0x2283
	case "reflexsubset":
		return 0x2286
	case "reflexsuperset":
		return 0x2287
	case "circleplus":
		return 0x2295
	case "circlemultiply":
		return 0x2297
	case "perpendicular":
		return 0x22a5
	case "dotmath":
		return 0x22c5
	case "lozenge":
		return 0x25ca
	case "ff":
		return 0xfb00
	case "fi":
		return 0xfb01
	case "fl":
		return 0xfb02
	case "ffi":
		return 0xfb03
	case "ffl":
		return 0xfb04
	case "Alpha":
		return 0x391
	case "Beta":
		return 0x392
	case "Gamma":
		return 0x393
	case "Delta":
		return 0x394
	case "Epsilon":
		return 0x395
	case "Zeta":
		return 0x396
	case "Eta":
		return 0x397
	case "Theta":
		return 0x398
	case "Iota":
		return 0x399
	case "Kappa":
		return 0x39a
	case "Lambda":
		return 0x39b
	case "Mu":
		return 0x39c
	case "Nu":
		return 0x39d
	case "Xi":
		return 0x39e
	case "Omicron":
		return 0x39f
	case "Pi":
		return 0x3a0
	case "Rho":
		return 0x3a1
	case "Sigma":
		return 0x3a3
	case "Tau":
		return 0x3a4
	case "Upsilon":
		return 0x3a5
	case "Phi":
		return 0x3a6
	case "Chi":
		return 0x3a7
	case "Psi":
		return 0x3a8
	case "Omega":
		return 0x3a9
	case "alpha":
		return 0x3b1
	case "beta":
		return 0x3b2
	case "gamma":
		return 0x3b3
	case "delta":
		return 0x3b4
	case "epsilon":
		return 0x3b5
	case "zeta":
		return 0x3b6
	case "eta":
		return 0x3b7
	case "theta":
		return 0x3b8
	case "iota":
		return 0x3b9
	case "kappa":
		return 0x3ba
	case "lambda":
		return 0x3bb
	case "nu":
		return 0x3bd
	case "xi":
		return 0x3be
	case "omicron":
		return 0x3bf
	case "pi":
		return 0x3c0
	case "rho":
		return 0x3c1
	case "sigma1":
		return 0x3c2
	case "sigma":
		return 0x3c3
	case "tau":
		return 0x3c4
	case "upsilon":
		return 0x3c5
	case "phi":
		return 0x3c6
	case "chi":
		return 0x3c7
	case "psi":
		return 0x3c8
	case "omega":
		return 0x3c9
	case "theta1":
		return 0x3d1
	case "phi1":
		return 0x3d5
	case "omega1":
		return 0x3d6
	}
	return 0
}

// helveticaWidth and timesWidth are the AFM advance widths (1/1000 em) of
// the standard 14 fonts for ASCII (WinAnsi code order); PDFs may use these
// fonts without a /Widths array, and glyph positions need an advance.
func helveticaWidth(r rune) float64 {
	if r < 32 || r > 126 {
		return 556
	}
	w := [95]uint16{
		278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
		556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
		1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
		667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
		333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
		556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
	}
	return float64(w[r-32])
}

func timesWidth(r rune) float64 {
	if r < 32 || r > 126 {
		return 500
	}
	w := [95]uint16{
		250, 333, 408, 500, 500, 833, 778, 180, 333, 333, 500, 564, 250, 333, 250, 278,
		500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 278, 278, 564, 564, 564, 444,
		921, 722, 667, 667, 722, 611, 556, 722, 722, 333, 389, 722, 611, 889, 722, 722,
		556, 722, 667, 556, 611, 722, 722, 944, 722, 722, 611, 333, 278, 333, 469, 500,
		333, 444, 500, 444, 500, 444, 333, 500, 500, 278, 278, 500, 278, 778, 500, 500,
		500, 500, 333, 389, 278, 500, 500, 722, 500, 500, 444, 480, 200, 480, 541,
	}
	return float64(w[r-32])
}
