package pdf

// The content-stream and CMap tokenizer. The PDF library resolves objects
// and decodes streams; the bytes of a page's content stream and of a font's
// CMap are tokenized here because doing it ourselves avoids one interface
// allocation per operand, skips inline image data correctly (BI … ID … EI)
// and never panics: malformed input yields odd tokens, not a crash.

// Operand kinds.
const (
	opdNum = iota + 1
	opdStr
	opdName
	opdArray // elems[lo:hi] of the opReader
	opdDict  // contents dropped: content streams only use them for marked-content properties
	opdBool
	opdNull
)

// operand is one value on the operand stack. s aliases the stream data or the
// reader's scratch arena; it is valid until the next call to opReader.next.
type operand struct {
	kind   uint8
	num    float64
	s      []byte
	lo, hi int
}

// opReader reads "operand* operator" groups from PostScript-like data (page
// content streams, CMaps).
type opReader struct {
	data  []byte
	pos   int
	args  []operand
	elems []operand // array elements, flattened
	arena []byte    // decoded strings and names
	marks []int     // positions in args where '[' or '<<' opened
	kinds []uint8   // opdArray or opdDict for each mark
}

func newOpReader(data []byte) *opReader {
	return &opReader{data: data, args: make([]operand, 0, 16), arena: make([]byte, 0, 256)}
}

func isWhite(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

func isDelim(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

// next returns the next operator with its operands in r.args (and array
// elements in r.elems). ok is false at the end of the data.
func (r *opReader) next() (op []byte, ok bool) {
	r.args = r.args[:0]
	r.elems = r.elems[:0]
	r.arena = r.arena[:0]
	r.marks = r.marks[:0]
	r.kinds = r.kinds[:0]
	d := r.data
	for r.pos < len(d) {
		c := d[r.pos]
		switch {
		case isWhite(c):
			r.pos++
		case c == '%':
			for r.pos < len(d) && d[r.pos] != '\n' && d[r.pos] != '\r' {
				r.pos++
			}
		case c == '/':
			r.pos++
			start := r.pos
			for r.pos < len(d) && !isWhite(d[r.pos]) && !isDelim(d[r.pos]) {
				r.pos++
			}
			r.push(operand{kind: opdName, s: r.unescapeName(d[start:r.pos])})
		case c == '(':
			r.push(operand{kind: opdStr, s: r.literal()})
		case c == '<':
			if r.pos+1 < len(d) && d[r.pos+1] == '<' {
				r.pos += 2
				r.marks = append(r.marks, len(r.args))
				r.kinds = append(r.kinds, opdDict)
				continue
			}
			r.push(operand{kind: opdStr, s: r.hex()})
		case c == '>':
			r.pos++
			if r.pos < len(d) && d[r.pos] == '>' {
				r.pos++
			}
			r.closeMark(opdDict)
		case c == '[':
			r.pos++
			r.marks = append(r.marks, len(r.args))
			r.kinds = append(r.kinds, opdArray)
		case c == ']':
			r.pos++
			r.closeMark(opdArray)
		case c == '{' || c == '}' || c == ')':
			r.pos++ // PostScript procedures (in CMaps) and stray delimiters carry no text
		case c == '+' || c == '-' || c == '.' || (c >= '0' && c <= '9'):
			r.push(operand{kind: opdNum, num: r.number()})
		default:
			start := r.pos
			for r.pos < len(d) && !isWhite(d[r.pos]) && !isDelim(d[r.pos]) {
				r.pos++
			}
			kw := d[start:r.pos]
			if r.pos == start { // a lone delimiter we do not handle
				r.pos++
				continue
			}
			switch string(kw) {
			case "true", "false":
				r.push(operand{kind: opdBool, num: boolNum(kw[0] == 't')})
				continue
			case "null":
				r.push(operand{kind: opdNull})
				continue
			case "ID":
				r.skipInlineImage()
				r.args = r.args[:0]
				r.marks = r.marks[:0]
				r.kinds = r.kinds[:0]
				return kw, true
			}
			if len(r.marks) > 0 {
				// An operator inside an unterminated array or dict: the
				// array was malformed; close it so the operator still runs.
				for len(r.marks) > 0 {
					r.closeMark(r.kinds[len(r.kinds)-1])
				}
			}
			return kw, true
		}
	}
	return nil, false
}

func boolNum(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (r *opReader) push(o operand) { r.args = append(r.args, o) }

// closeMark turns the operands above the innermost mark into one array
// (elements kept, flattened into r.elems) or one dict (contents dropped).
func (r *opReader) closeMark(kind uint8) {
	n := len(r.marks)
	if n == 0 || r.kinds[n-1] != kind {
		return // unbalanced close: ignore
	}
	at := r.marks[n-1]
	r.marks = r.marks[:n-1]
	r.kinds = r.kinds[:n-1]
	if kind == opdDict {
		r.args = append(r.args[:at], operand{kind: opdDict})
		return
	}
	lo := len(r.elems)
	for _, e := range r.args[at:] {
		if e.kind == opdArray { // nested array: splice its elements
			r.elems = append(r.elems, r.elems[e.lo:e.hi]...)
			continue
		}
		r.elems = append(r.elems, e)
	}
	r.args = append(r.args[:at], operand{kind: opdArray, lo: lo, hi: len(r.elems)})
}

func (r *opReader) number() float64 {
	d := r.data
	neg := false
	for r.pos < len(d) && (d[r.pos] == '+' || d[r.pos] == '-') {
		neg = d[r.pos] == '-'
		r.pos++
	}
	var v float64
	for r.pos < len(d) && d[r.pos] >= '0' && d[r.pos] <= '9' {
		v = v*10 + float64(d[r.pos]-'0')
		r.pos++
	}
	if r.pos < len(d) && d[r.pos] == '.' {
		r.pos++
		scale := 0.1
		for r.pos < len(d) && d[r.pos] >= '0' && d[r.pos] <= '9' {
			v += float64(d[r.pos]-'0') * scale
			scale /= 10
			r.pos++
		}
	}
	// Swallow junk glued to a number ("1.2.3", "5-") so it cannot become
	// a bogus operator.
	for r.pos < len(d) && !isWhite(d[r.pos]) && !isDelim(d[r.pos]) {
		r.pos++
	}
	if neg {
		v = -v
	}
	return v
}

func (r *opReader) literal() []byte {
	d := r.data
	r.pos++ // '('
	start := r.pos
	// Fast path: no escapes and no nested parentheses.
	for i := start; i < len(d); i++ {
		switch d[i] {
		case ')':
			r.pos = i + 1
			return d[start:i]
		case '\\', '(':
			i = len(d)
		}
	}
	a := len(r.arena)
	depth := 1
	for r.pos < len(d) {
		c := d[r.pos]
		r.pos++
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return r.arena[a:]
			}
		case '\\':
			if r.pos >= len(d) {
				return r.arena[a:]
			}
			c = d[r.pos]
			r.pos++
			switch c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case '\r':
				if r.pos < len(d) && d[r.pos] == '\n' {
					r.pos++
				}
				continue
			case '\n':
				continue
			default:
				if c >= '0' && c <= '7' {
					v := int(c - '0')
					for k := 0; k < 2 && r.pos < len(d) && d[r.pos] >= '0' && d[r.pos] <= '7'; k++ {
						v = v*8 + int(d[r.pos]-'0')
						r.pos++
					}
					c = byte(v)
				}
			}
		}
		r.arena = append(r.arena, c)
	}
	return r.arena[a:]
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func (r *opReader) hex() []byte {
	d := r.data
	r.pos++ // '<'
	a := len(r.arena)
	var hi byte
	half := false
	for r.pos < len(d) {
		c := d[r.pos]
		r.pos++
		if c == '>' {
			break
		}
		v, ok := unhex(c)
		if !ok {
			continue
		}
		if half {
			r.arena = append(r.arena, hi<<4|v)
		} else {
			hi = v
		}
		half = !half
	}
	if half {
		r.arena = append(r.arena, hi<<4)
	}
	return r.arena[a:]
}

func (r *opReader) unescapeName(s []byte) []byte {
	i := 0
	for i < len(s) && s[i] != '#' {
		i++
	}
	if i == len(s) {
		return s
	}
	a := len(r.arena)
	for j := 0; j < len(s); j++ {
		if s[j] == '#' && j+2 < len(s) {
			h, ok1 := unhex(s[j+1])
			l, ok2 := unhex(s[j+2])
			if ok1 && ok2 {
				r.arena = append(r.arena, h<<4|l)
				j += 2
				continue
			}
		}
		r.arena = append(r.arena, s[j])
	}
	return r.arena[a:]
}

// skipInlineImage moves past the binary data of an inline image: from after
// the ID operator to the EI that is surrounded by white space. This is the
// usual heuristic; image data containing " EI " can still fool it, which at
// worst loses text from the rest of that content stream.
func (r *opReader) skipInlineImage() {
	d := r.data
	if r.pos < len(d) && isWhite(d[r.pos]) {
		r.pos++
	}
	for i := r.pos; i+1 < len(d); i++ {
		if d[i] == 'E' && d[i+1] == 'I' && (i == 0 || isWhite(d[i-1])) && (i+2 == len(d) || isWhite(d[i+2]) || isDelim(d[i+2])) {
			r.pos = i + 2
			return
		}
	}
	r.pos = len(d)
}
