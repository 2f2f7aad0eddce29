package pdf

import (
	"bytes"
	"compress/zlib"
	"crypto/md5"
	"crypto/rc4"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A tiny PDF writer for test fixtures: pages of text runs placed at given
// coordinates in Helvetica (WinAnsi, with the fi/fl ligatures on codes 1
// and 2) or in a Type 0 font with Identity-H codes equal to the Unicode
// code points and a ToUnicode CMap; optional image-only pages, Flate
// compression and the standard security handler (RC4, 40 bits).

type run struct {
	x, y, size float64
	text       string
	cjk        bool // the Type 0 font
	kerned     bool // words as a TJ array with a displacement instead of spaces
	rotated    bool // text running up the page (90°)
}

type page struct {
	runs    []run
	image   bool   // an image XObject covering the page: a "scan"
	corrupt bool   // a Flate content stream whose data is not Flate
	field   string // the value of a form field, drawn by its appearance stream
}

type pdfOptions struct {
	compress bool
	// encrypt uses the standard security handler with RC4 and an empty
	// user password; keyBits is 40 (revision 2) or 128 (revision 3).
	encrypt bool
	keyBits int
	// lockedEncrypt adds an RC4 40-bit /Encrypt dictionary whose U entry
	// matches no password we know: unreadable.
	lockedEncrypt bool
}

// helvetica encodes text for the F1 font: WinAnsi bytes, with the ligatures
// ﬁ and ﬂ on codes 1 and 2.
func helvetica(s string) []byte {
	var b []byte
	for _, r := range s {
		switch {
		case r == 0xfb01:
			b = append(b, 1)
		case r == 0xfb02:
			b = append(b, 2)
		case r < 0x100:
			b = append(b, byte(r))
		default:
			b = append(b, '?')
		}
	}
	return b
}

func pdfString(b []byte) string {
	var s strings.Builder
	s.WriteByte('(')
	for _, c := range b {
		switch {
		case c == '(' || c == ')' || c == '\\':
			s.WriteByte('\\')
			s.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&s, "\\%03o", c)
		default:
			s.WriteByte(c)
		}
	}
	s.WriteByte(')')
	return s.String()
}

func cidHex(s string) string {
	var b strings.Builder
	b.WriteByte('<')
	for _, r := range s {
		fmt.Fprintf(&b, "%04X", r)
	}
	b.WriteByte('>')
	return b.String()
}

func content(p page) []byte {
	var b bytes.Buffer
	if p.image {
		b.WriteString("q 612 0 0 792 0 0 cm /Im1 Do Q\n")
	}
	for _, r := range p.runs {
		font := "/F1"
		if r.cjk {
			font = "/F2"
		}
		m := "1 0 0 1"
		if r.rotated {
			m = "0 1 -1 0"
		}
		fmt.Fprintf(&b, "BT %s %g Tf %s %g %g Tm ", font, r.size, m, r.x, r.y)
		switch {
		case r.cjk:
			fmt.Fprintf(&b, "%s Tj", cidHex(r.text))
		case r.kerned:
			b.WriteByte('[')
			for i, w := range strings.Fields(r.text) {
				if i > 0 {
					b.WriteString(" -278 ")
				}
				b.WriteString(pdfString(helvetica(w)))
			}
			b.WriteString("] TJ")
		default:
			fmt.Fprintf(&b, "%s Tj", pdfString(helvetica(r.text)))
		}
		b.WriteString(" ET\n")
	}
	return b.Bytes()
}

// pdfDoc accumulates numbered objects.
type pdfDoc struct {
	objs [][]byte // objs[i] is object i+1
	key  []byte   // RC4 file key when encrypting
}

func (d *pdfDoc) add(body string) int {
	d.objs = append(d.objs, []byte(body))
	return len(d.objs)
}

func (d *pdfDoc) reserve() int { return d.add("") }

func (d *pdfDoc) set(n int, body string) { d.objs[n-1] = []byte(body) }

// stream adds a stream object; data is compressed and encrypted as asked.
func (d *pdfDoc) stream(dict string, data []byte, compress bool) int {
	n := len(d.objs) + 1
	if compress {
		var z bytes.Buffer
		w := zlib.NewWriter(&z)
		w.Write(data)
		w.Close()
		data = z.Bytes()
		dict += " /Filter /FlateDecode"
	}
	if d.key != nil {
		data = rc4Object(d.key, n, data)
	}
	body := fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
	d.objs = append(d.objs, []byte(body))
	return n
}

const padding = ("\x28\xBF\x4E\x5E\x4E\x75\x8A\x41\x64\x00\x4E\x56\xFF\xFA\x01\x08\x2E\x2E\x00\xB6\xD0\x68\x3E\x80\x2F\x0C\xA9\xFE\x64\x53\x69\x7A")

func rc4Crypt(key, data []byte) []byte {
	c, err := rc4.NewCipher(key)
	if err != nil {
		panic(err)
	}
	out := make([]byte, len(data))
	c.XORKeyStream(out, data)
	return out
}

// rc4Object encrypts the data of object n (generation 0): PDF 32000-1
// Algorithm 1.
func rc4Object(key []byte, n int, data []byte) []byte {
	h := md5.New()
	h.Write(key)
	h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), 0, 0})
	return rc4Crypt(h.Sum(nil)[:min(len(key)+5, 16)], data)
}

// securityHandler computes the O and U entries and the file key for an
// empty user password and the owner password "owner" (PDF 32000-1
// Algorithms 2, 3, 4 and 5).
func securityHandler(id []byte, perms int32, bits int) (o, u, key []byte, dict string) {
	pad := []byte(padding)
	n := 5
	if bits == 128 {
		n = 16
	}
	ownerKey := md5.Sum([]byte("owner" + padding[:32-5]))
	if n == 16 {
		for i := 0; i < 50; i++ {
			ownerKey = md5.Sum(ownerKey[:])
		}
	}
	o = rc4Crypt(ownerKey[:n], pad)
	if n == 16 {
		for i := 1; i <= 19; i++ {
			o = rc4Crypt(xorKey(ownerKey[:n], byte(i)), o)
		}
	}
	h := md5.New()
	h.Write(pad)
	h.Write(o)
	binary.Write(h, binary.LittleEndian, perms)
	h.Write(id)
	key = h.Sum(nil)[:n]
	if n == 5 {
		return o, rc4Crypt(key, pad), key, "/V 1 /R 2 /Length 40"
	}
	for i := 0; i < 50; i++ {
		s := md5.Sum(key)
		key = s[:n]
	}
	uh := md5.Sum(append(append([]byte{}, pad...), id...))
	u = rc4Crypt(key, uh[:])
	for i := 1; i <= 19; i++ {
		u = rc4Crypt(xorKey(key, byte(i)), u)
	}
	return o, append(u, make([]byte, 16)...), key, "/V 2 /R 3 /Length 128"
}

func xorKey(k []byte, x byte) []byte {
	out := make([]byte, len(k))
	for i := range k {
		out[i] = k[i] ^ x
	}
	return out
}

// buildPDF writes a PDF with the given pages.
func buildPDF(t testing.TB, pages []page, opt pdfOptions) []byte {
	t.Helper()
	d := &pdfDoc{}
	id := []byte("0123456789abcdef")
	const perms int32 = -44
	var encrypt string
	if opt.encrypt || opt.lockedEncrypt {
		o, u, key, dict := securityHandler(id, perms, opt.keyBits)
		if opt.lockedEncrypt {
			u = bytes.Repeat([]byte{0x42}, 32)
		} else {
			d.key = key
		}
		encrypt = fmt.Sprintf("<< /Filter /Standard %s /O <%X> /U <%X> /P %d >>", dict, o, u, perms)
	}

	catalog := d.reserve()
	tree := d.reserve()
	helv := d.add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [1 /fi /fl] >> >>")
	fonts := fmt.Sprintf("/F1 %d 0 R", helv)
	var cjk []rune
	for _, p := range pages {
		for _, r := range p.runs {
			if r.cjk {
				cjk = append(cjk, []rune(r.text)...)
			}
		}
	}
	if len(cjk) > 0 {
		slices.Sort(cjk)
		cjk = slices.Compact(cjk)
		var cm bytes.Buffer
		cm.WriteString("/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n/CMapName /Test-UCS def /CMapType 2 def\n")
		cm.WriteString("1 begincodespacerange <0000> <FFFF> endcodespacerange\n")
		fmt.Fprintf(&cm, "%d beginbfchar\n", len(cjk))
		for _, r := range cjk {
			fmt.Fprintf(&cm, "<%04X> <%04X>\n", r, r)
		}
		cm.WriteString("endbfchar\nendcmap CMapName currentdict /CMap defineresource pop end end\n")
		toUni := d.stream("", cm.Bytes(), opt.compress)
		desc := d.add("<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 1000 >>")
		f2 := d.add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", desc, toUni))
		fonts += fmt.Sprintf(" /F2 %d 0 R", f2)
	}
	img := d.stream("/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0, 255, 255, 0}, false)
	res := d.add(fmt.Sprintf("<< /Font << %s >> /XObject << /Im1 %d 0 R >> >>", fonts, img))
	var kids []string
	for _, p := range pages {
		var c int
		if p.corrupt {
			c = d.add("<< /Length 24 /Filter /FlateDecode >>\nstream\nthis is not flate data!!\nendstream")
		} else {
			c = d.stream("", content(p), opt.compress)
		}
		annots := ""
		if p.field != "" {
			ap := d.stream(fmt.Sprintf("/Type /XObject /Subtype /Form /BBox [0 0 200 20] /Resources %d 0 R", res),
				[]byte("BT /F1 10 Tf 2 6 Td "+pdfString(helvetica(p.field))+" Tj ET"), opt.compress)
			annot := d.add(fmt.Sprintf("<< /Type /Annot /Subtype /Widget /FT /Tx /Rect [72 400 272 420] /AP << /N %d 0 R >> >>", ap))
			annots = fmt.Sprintf(" /Annots [%d 0 R]", annot)
		}
		pg := d.add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources %d 0 R /Contents %d 0 R%s >>", tree, res, c, annots))
		kids = append(kids, fmt.Sprintf("%d 0 R", pg))
	}
	d.set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree))
	d.set(tree, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(kids)))
	trailer := fmt.Sprintf("/Root %d 0 R", catalog)
	if encrypt != "" {
		enc := d.add(encrypt)
		trailer += fmt.Sprintf(" /Encrypt %d 0 R /ID [<%X> <%X>]", enc, id, id)
	}

	return d.bytes(trailer)
}

// bytes serializes the objects with a cross-reference table and a trailer
// holding the given entries (besides /Size).
func (d *pdfDoc) bytes(trailer string) []byte {
	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(d.objs))
	for i, o := range d.objs {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(d.objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n", len(d.objs)+1, trailer, xref)
	return out.Bytes()
}

// column lays out lines top-down from y with the given pitch.
func column(x, y, pitch, size float64, lines ...string) []run {
	var rs []run
	for i, l := range lines {
		rs = append(rs, run{x: x, y: y - float64(i)*pitch, size: size, text: l})
	}
	return rs
}

// interleave merges runs row by row (a0 b0 a1 b1 …), the stream order of a
// producer that writes two columns line by line.
func interleave(a, b []run) []run {
	var out []run
	for i := 0; i < max(len(a), len(b)); i++ {
		if i < len(a) {
			out = append(out, a[i])
		}
		if i < len(b) {
			out = append(out, b[i])
		}
	}
	return out
}
