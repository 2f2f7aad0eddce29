package pdf

import (
	"math"

	lpdf "github.com/ledongthuc/pdf"
)

// matrix is a PDF transformation matrix [a b c d e f].
type matrix [6]float64

func identity() matrix { return matrix{1, 0, 0, 1, 0, 0} }

// mul returns m×n: apply m, then n.
func (m matrix) mul(n matrix) matrix {
	return matrix{
		m[0]*n[0] + m[1]*n[2],
		m[0]*n[1] + m[1]*n[3],
		m[2]*n[0] + m[3]*n[2],
		m[2]*n[1] + m[3]*n[3],
		m[4]*n[0] + m[5]*n[2] + n[4],
		m[4]*n[1] + m[5]*n[3] + n[5],
	}
}

// translate returns [1 0 0 1 tx ty]×m.
func (m matrix) translate(tx, ty float64) matrix {
	m[4] += tx*m[0] + ty*m[2]
	m[5] += tx*m[1] + ty*m[3]
	return m
}

// glyph is one shown character in the coordinates of its rotation frame:
// the frame is rotated so that its text runs left to right, x along the
// baseline and y up.
type glyph struct {
	x, y  float64 // origin
	w     float64 // advance along the baseline
	size  float64 // font size (em) in user space
	text  string
	rot   uint8 // text direction in user space: 0 →, 1 ↑, 2 ←, 3 ↓
	space bool  // a space character: a word boundary, not text
}

type gstate struct {
	ctm       matrix
	font      *font
	fontSize  float64
	charSpace float64
	wordSpace float64
	hscale    float64
	leading   float64
	rise      float64
}

// resources is a resource dictionary with the fonts resolved so far.
type resources struct {
	v     lpdf.Value
	fonts map[string]*font
}

// Interpreter limits: a hostile content stream must not exhaust memory or
// recurse forever.
const (
	maxFormDepth     = 8
	maxGStateDepth   = 256
	maxGlyphsPerPage = 1 << 21
)

// interp runs one page's content stream and collects its glyphs.
type interp struct {
	doc    *document
	gs     gstate
	stack  []gstate
	tm     matrix
	tlm    matrix
	glyphs []glyph
	depth  int
	forms  []string // keys of the forms being run, against cycles
}

func (in *interp) run(data []byte, res *resources) {
	r := newOpReader(data)
	for len(in.glyphs) < maxGlyphsPerPage {
		op, ok := r.next()
		if !ok {
			return
		}
		a := r.args
		num := func(i int) float64 {
			if i < len(a) {
				return a[i].num
			}
			return 0
		}
		switch string(op) {
		case "q":
			if len(in.stack) < maxGStateDepth {
				in.stack = append(in.stack, in.gs)
			}
		case "Q":
			if n := len(in.stack); n > 0 {
				in.gs = in.stack[n-1]
				in.stack = in.stack[:n-1]
			}
		case "cm":
			if len(a) == 6 {
				in.gs.ctm = matrix{num(0), num(1), num(2), num(3), num(4), num(5)}.mul(in.gs.ctm)
			}
		case "BT":
			in.tm, in.tlm = identity(), identity()
		case "Tc":
			in.gs.charSpace = num(0)
		case "Tw":
			in.gs.wordSpace = num(0)
		case "Tz":
			in.gs.hscale = num(0) / 100
		case "TL":
			in.gs.leading = num(0)
		case "Ts":
			in.gs.rise = num(0)
		case "Tf":
			if len(a) == 2 {
				in.gs.font = in.doc.font(res, string(a[0].s))
				in.gs.fontSize = a[1].num
			}
		case "Td":
			in.tlm = in.tlm.translate(num(0), num(1))
			in.tm = in.tlm
		case "TD":
			in.gs.leading = -num(1)
			in.tlm = in.tlm.translate(num(0), num(1))
			in.tm = in.tlm
		case "Tm":
			if len(a) == 6 {
				in.tlm = matrix{num(0), num(1), num(2), num(3), num(4), num(5)}
				in.tm = in.tlm
			}
		case "T*":
			in.tlm = in.tlm.translate(0, -in.gs.leading)
			in.tm = in.tlm
		case "Tj":
			if len(a) > 0 && a[len(a)-1].kind == opdStr {
				in.show(a[len(a)-1].s)
			}
		case "'":
			in.tlm = in.tlm.translate(0, -in.gs.leading)
			in.tm = in.tlm
			if len(a) > 0 && a[len(a)-1].kind == opdStr {
				in.show(a[len(a)-1].s)
			}
		case "\"":
			if len(a) == 3 {
				in.gs.wordSpace, in.gs.charSpace = num(0), num(1)
			}
			in.tlm = in.tlm.translate(0, -in.gs.leading)
			in.tm = in.tlm
			if len(a) > 0 && a[len(a)-1].kind == opdStr {
				in.show(a[len(a)-1].s)
			}
		case "TJ":
			if len(a) == 0 || a[len(a)-1].kind != opdArray {
				continue
			}
			arr := a[len(a)-1]
			for _, e := range r.elems[arr.lo:arr.hi] {
				switch e.kind {
				case opdStr:
					in.show(e.s)
				case opdNum:
					d := -e.num / 1000 * in.gs.fontSize
					if in.gs.font != nil && in.gs.font.vertical {
						in.tm = in.tm.translate(0, d)
					} else {
						in.tm = in.tm.translate(d*in.gs.hscale, 0)
					}
				}
			}
		case "Do":
			if len(a) > 0 && a[0].kind == opdName {
				in.doForm(res, string(a[0].s))
			}
		}
	}
}

// show places the glyphs of one shown string.
func (in *interp) show(s []byte) {
	f := in.gs.font
	if f == nil {
		f = in.doc.fallbackFont()
	}
	gs := &in.gs
	m := in.tm.mul(gs.ctm)
	ax, ay, cx, cy := m[0], m[1], m[2], m[3]
	ox, oy := m[4]+gs.rise*cx, m[5]+gs.rise*cy
	sx, sy := math.Hypot(ax, ay), math.Hypot(cx, cy)
	dx, dy := ax, ay // text direction
	size := math.Abs(gs.fontSize) * sy * f.sizeScale
	if f.vertical {
		dx, dy = -cx, -cy
		size = math.Abs(gs.fontSize) * sx
	}
	var rot uint8
	switch {
	case math.Abs(dx) >= math.Abs(dy) && dx >= 0:
		rot = 0
	case math.Abs(dx) >= math.Abs(dy):
		rot = 2
	case dy > 0:
		rot = 1
	default:
		rot = 3
	}
	var t float64 // displacement along the text direction, text space
	for len(s) > 0 {
		code, n := f.nextCode(s)
		text, w0 := f.glyph(code, n, s[:n])
		s = s[n:]
		var adv float64
		if f.vertical {
			adv = -(gs.fontSize + gs.charSpace) // one em down per glyph
		} else {
			adv = (w0*gs.fontSize + gs.charSpace) * gs.hscale
		}
		if n == 1 && code == 32 {
			if f.vertical {
				adv -= gs.wordSpace
			} else {
				adv += gs.wordSpace * gs.hscale
			}
		}
		if text != "" && len(in.glyphs) < maxGlyphsPerPage {
			var px, py, w float64
			if f.vertical {
				px, py = t*cx+ox, t*cy+oy
				w = math.Abs(gs.fontSize) * sy
			} else {
				px, py = t*ax+ox, t*ay+oy
				w = w0 * gs.fontSize * gs.hscale * sx
			}
			g := glyph{w: math.Abs(w), size: size, text: text, rot: rot, space: text == " "}
			switch rot {
			case 0:
				g.x, g.y = px, py
			case 1:
				g.x, g.y = py, -px
			case 2:
				g.x, g.y = -px, -py
			case 3:
				g.x, g.y = -py, px
			}
			in.glyphs = append(in.glyphs, g)
		}
		t += adv
	}
	if f.vertical {
		in.tm = in.tm.translate(0, t)
	} else {
		in.tm = in.tm.translate(t, 0)
	}
}

// doForm runs a form XObject: its content in its own resources, with its
// matrix, inside a saved graphics state.
func (in *interp) doForm(res *resources, name string) {
	if in.depth >= maxFormDepth {
		return
	}
	xo := res.v.Key("XObject").Key(name)
	if xo.Kind() != lpdf.Stream || xo.Key("Subtype").Name() != "Form" {
		return // images and the like carry no text
	}
	fm := in.doc.form(xo, res)
	if fm == nil {
		return
	}
	for _, k := range in.forms {
		if k == fm.key {
			return
		}
	}
	savedGS, savedTM, savedTLM, savedStack := in.gs, in.tm, in.tlm, len(in.stack)
	in.gs.ctm = fm.matrix.mul(in.gs.ctm)
	in.depth++
	in.forms = append(in.forms, fm.key)
	fres := fm.res
	if fres == nil {
		fres = res
	}
	in.run(fm.data, fres)
	in.forms = in.forms[:len(in.forms)-1]
	in.depth--
	in.gs, in.tm, in.tlm, in.stack = savedGS, savedTM, savedTLM, in.stack[:savedStack]
}
