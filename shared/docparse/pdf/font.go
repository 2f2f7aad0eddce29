package pdf

import (
	"math"
	"strings"

	lpdf "github.com/ledongthuc/pdf"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// font is what the text extractor needs of a PDF font: how to split a shown
// string into codes, the text of each code and its advance width. Fonts are
// built once per document (see doc.font) and only used by one goroutine.
type font struct {
	composite bool
	vertical  bool
	// sizeScale converts the font size to an em in text space: 1 except for
	// Type 3 fonts, whose glyph space is their own.
	sizeScale float64

	// Simple fonts: one byte per code.
	text  [256]string
	width [256]float64 // advance in text space units for a font size of 1

	// Composite (Type 0) fonts.
	fixed2 bool        // Identity and UCS-2 CMaps: every code is two bytes
	space  []codeRange // otherwise the codespace of the encoding CMap
	encMap *cmapData   // an embedded encoding CMap (code → CID), or nil
	toUni  *cmapData   // the ToUnicode CMap, or nil
	legacy encoding.Encoding
	ucs2   bool               // codes are UCS-2 (Uni…-UCS2-H CMaps)
	cache  map[uint32]string  // code → normalized text
	widths map[uint32]float64 // CID → advance
	dw     float64            // default advance
}

// nextCode returns the first code of s and its length in bytes.
func (f *font) nextCode(s []byte) (uint32, int) {
	if !f.composite {
		return uint32(s[0]), 1
	}
	if f.fixed2 {
		if len(s) < 2 {
			return uint32(s[0]), 1
		}
		return uint32(s[0])<<8 | uint32(s[1]), 2
	}
	return splitCode(f.space, s)
}

// glyph returns the text and advance (text space, font size 1) of a code.
func (f *font) glyph(code uint32, n int, raw []byte) (string, float64) {
	if !f.composite {
		return f.text[code&0xff], f.width[code&0xff]
	}
	t, ok := f.cache[code]
	if !ok {
		t = f.compositeText(code, raw)
		f.cache[code] = t
	}
	cid := code
	if f.encMap != nil {
		if c, ok := f.encMap.cid(code); ok {
			cid = c
		}
	} else if !f.fixed2 && f.legacy != nil {
		// Legacy CJK CMaps: the CID is unknown without Adobe's tables;
		// one-byte codes are half-width Latin, two-byte ones full width.
		if n == 1 {
			return t, f.dw / 2
		}
		return t, f.dw
	}
	if w, ok := f.widths[cid]; ok {
		return t, w
	}
	return t, f.dw
}

func (f *font) compositeText(code uint32, raw []byte) string {
	if f.toUni != nil {
		if s, ok := f.toUni.lookup(code); ok {
			return normalizeText(s)
		}
	}
	switch {
	case f.ucs2:
		return normalizeText(string(rune(code)))
	case f.legacy != nil:
		if len(raw) == 1 && raw[0] < 0x80 {
			return normalizeText(string(rune(raw[0])))
		}
		b, err := f.legacy.NewDecoder().Bytes(raw)
		if err != nil {
			return ""
		}
		return normalizeText(string(b))
	}
	return ""
}

// stripSubset removes the "ABCDEF+" prefix of subset font names.
func stripSubset(name string) string {
	if len(name) > 7 && name[6] == '+' {
		return name[7:]
	}
	return name
}

func readStream(v lpdf.Value) []byte {
	if v.Kind() != lpdf.Stream {
		return nil
	}
	rc := v.Reader()
	defer rc.Close()
	data, err := readAllLimit(rc, maxStreamBytes)
	if err != nil {
		return nil // a broken CMap costs its text, not the page
	}
	return data
}

// loadFont builds a font from its dictionary.
func loadFont(v lpdf.Value) *font {
	f := &font{sizeScale: 1}
	var toUni *cmapData
	if tu := v.Key("ToUnicode"); tu.Kind() == lpdf.Stream {
		toUni = parseCMap(readStream(tu))
	}
	if v.Key("Subtype").Name() == "Type0" {
		loadComposite(f, v, toUni)
		return f
	}
	loadSimple(f, v, toUni)
	return f
}

func loadSimple(f *font, v lpdf.Value, toUni *cmapData) {
	subtype := v.Key("Subtype").Name()
	base := stripSubset(v.Key("BaseFont").Name())
	desc := v.Key("FontDescriptor")
	symbolic := desc.Key("Flags").Int64()&4 != 0

	enc := encStandard
	if subtype == "TrueType" {
		enc = encWinAnsi
		if symbolic {
			enc = encSymbol
		}
	}
	encV := v.Key("Encoding")
	encName := encV.Name()
	if encV.Kind() == lpdf.Dict {
		encName = encV.Key("BaseEncoding").Name()
	}
	switch encName {
	case "WinAnsiEncoding":
		enc = encWinAnsi
	case "MacRomanEncoding", "MacExpertEncoding":
		enc = encMacRoman
	case "PDFDocEncoding":
		enc = encPDFDoc
	case "StandardEncoding":
		enc = encStandard
	}
	for c := 0; c < 256; c++ {
		if r := baseRune(enc, byte(c)); r != 0 {
			f.text[c] = normalizeText(string(r))
		}
	}
	if encV.Kind() == lpdf.Dict {
		diffs := encV.Key("Differences")
		code := 0
		for i, n := 0, diffs.Len(); i < n; i++ {
			x := diffs.Index(i)
			switch x.Kind() {
			case lpdf.Integer, lpdf.Real:
				code = int(x.Float64())
			case lpdf.Name:
				if code >= 0 && code < 256 {
					t, _ := glyphNameText(x.Name())
					f.text[code] = normalizeText(t)
				}
				code++
			}
		}
	}
	if toUni != nil {
		for c := 0; c < 256; c++ {
			if s, ok := toUni.lookup(uint32(c)); ok {
				f.text[c] = normalizeText(s)
			}
		}
	}

	// Advances.
	scale := 0.001
	if subtype == "Type3" {
		m := v.Key("FontMatrix")
		if m.Len() == 6 {
			scale = math.Abs(m.Index(0).Float64())
			em := math.Abs(m.Index(3).Float64()) * 1000
			if bb := v.Key("FontBBox"); bb.Len() == 4 {
				if h := math.Abs(bb.Index(3).Float64()-bb.Index(1).Float64()) * math.Abs(m.Index(3).Float64()); h > 0 {
					em = h
				}
			}
			if em > 0.05 && em < 100 {
				f.sizeScale = em
			}
		}
	}
	missing := desc.Key("MissingWidth").Float64()
	metric := func(c int) float64 { // standard 14 metrics when Widths is absent
		r := rune(0)
		for _, x := range f.text[c] {
			r = x
			break
		}
		switch {
		case strings.Contains(base, "Courier"):
			return 600
		case strings.Contains(base, "Times"):
			return timesWidth(r)
		case strings.Contains(base, "Helvetica"), strings.Contains(base, "Arial"):
			return helveticaWidth(r)
		}
		if missing > 0 {
			return missing
		}
		return 500
	}
	widths := v.Key("Widths")
	first := int(v.Key("FirstChar").Int64())
	n := widths.Len()
	for c := 0; c < 256; c++ {
		w := 0.0
		if i := c - first; n > 0 && i >= 0 && i < n {
			w = widths.Index(i).Float64()
		} else if n > 0 && missing > 0 {
			w = missing
		} else {
			w = metric(c)
		}
		f.width[c] = w * scale
	}
}

func loadComposite(f *font, v lpdf.Value, toUni *cmapData) {
	f.composite = true
	f.toUni = toUni
	f.cache = make(map[uint32]string)
	f.widths = make(map[uint32]float64)
	f.dw = 1
	encV := v.Key("Encoding")
	if encV.Kind() == lpdf.Stream {
		m := parseCMap(readStream(encV))
		f.vertical = encV.Key("WMode").Int64() == 1
		if len(m.cids) > 0 {
			f.encMap = m
		}
		f.space = m.space
		if len(f.space) == 0 && m.useCMap != "" {
			predefinedCMap(f, m.useCMap)
		} else if len(f.space) == 0 {
			f.fixed2 = true
		}
	} else {
		predefinedCMap(f, encV.Name())
	}

	d := v.Key("DescendantFonts").Index(0)
	if dw := d.Key("DW"); dw.Kind() == lpdf.Integer || dw.Kind() == lpdf.Real {
		f.dw = dw.Float64() / 1000
	}
	w := d.Key("W")
	for i, n := 0, w.Len(); i < n; {
		first := w.Index(i)
		if i+1 >= n {
			break
		}
		next := w.Index(i + 1)
		if next.Kind() == lpdf.Array {
			c := uint32(first.Int64())
			for k, m := 0, next.Len(); k < m; k++ {
				f.widths[c+uint32(k)] = next.Index(k).Float64() / 1000
			}
			i += 2
			continue
		}
		if i+2 >= n {
			break
		}
		lo, hi, width := uint32(first.Float64()), uint32(next.Float64()), w.Index(i+2).Float64()/1000
		if hi >= lo && hi-lo < 1<<16 {
			for c := lo; c <= hi; c++ {
				f.widths[c] = width
			}
		}
		i += 3
	}
}

// predefinedCMap configures code splitting and the no-ToUnicode fallback for
// the CMaps predefined by name. Legacy CJK encodings are decoded with the
// matching character set, which gives the same Unicode text as Adobe's
// CID tables would for text-bearing codes.
func predefinedCMap(f *font, name string) {
	f.vertical = strings.HasSuffix(name, "-V")
	one := func(lo, hi byte) codeRange { return codeRange{n: 1, lo: [4]byte{lo}, hi: [4]byte{hi}} }
	two := func(lo0, hi0, lo1, hi1 byte) codeRange {
		return codeRange{n: 2, lo: [4]byte{lo0, lo1}, hi: [4]byte{hi0, hi1}}
	}
	switch {
	case strings.HasPrefix(name, "Identity"):
		f.fixed2 = true
	case strings.HasPrefix(name, "Uni") && (strings.Contains(name, "UCS2") || strings.Contains(name, "UTF16")):
		f.fixed2 = true
		f.ucs2 = true
	case strings.HasPrefix(name, "GB"):
		f.legacy = simplifiedchinese.GBK
		f.space = []codeRange{one(0x00, 0x80), two(0x81, 0xfe, 0x40, 0xfe)}
	case strings.Contains(name, "B5"), strings.HasPrefix(name, "CNS"):
		f.legacy = traditionalchinese.Big5
		f.space = []codeRange{one(0x00, 0x80), two(0x81, 0xfe, 0x40, 0xfe)}
	case strings.Contains(name, "RKSJ"):
		f.legacy = japanese.ShiftJIS
		f.space = []codeRange{one(0x00, 0x80), one(0xa0, 0xdf), two(0x81, 0x9f, 0x40, 0xfc), two(0xe0, 0xfc, 0x40, 0xfc)}
	case name == "EUC-H" || name == "EUC-V":
		f.legacy = japanese.EUCJP
		f.space = []codeRange{one(0x00, 0x80), two(0x8e, 0x8e, 0xa0, 0xdf), two(0xa1, 0xfe, 0xa1, 0xfe)}
	case strings.HasPrefix(name, "KSC"):
		f.legacy = korean.EUCKR
		f.space = []codeRange{one(0x00, 0x80), two(0x81, 0xfe, 0x41, 0xfe)}
	default:
		f.fixed2 = true
	}
}
