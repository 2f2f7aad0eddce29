// Package imagechecktest builds small real images for tests that upload
// them: a lossless WebP written bit by bit (the standard library has no
// WebP encoder), decodable by any WebP reader.
//
// Imported by: tests only. May import: the standard library.
package imagechecktest

import (
	"encoding/binary"
	"image/color"
)

// SolidWebP returns a w×h lossless WebP (VP8L, RIFF container) of one
// colour c (1 ≤ w, h ≤ 16384). Every pixel is the only symbol of its five
// prefix codes, so the pixels take no bits: the file is a few dozen bytes
// whatever its size — but a full, valid bitstream.
func SolidWebP(w, h int, c color.NRGBA) []byte {
	var bw bitWriter
	bw.put(0x2f, 8)         // VP8L signature
	bw.put(uint32(w-1), 14) // image width - 1
	bw.put(uint32(h-1), 14) // image height - 1
	alpha := uint32(0)
	if c.A != 0xff {
		alpha = 1
	}
	bw.put(alpha, 1) // alpha_is_used hint
	bw.put(0, 3)     // version 0
	bw.put(0, 1)     // no transform
	bw.put(0, 1)     // no colour cache
	bw.put(0, 1)     // no meta prefix codes
	// Five prefix codes (green, red, blue, alpha, distance), each a
	// "simple" code of one 8-bit symbol (distance: one 1-bit symbol, 0).
	for _, v := range []uint8{c.G, c.R, c.B, c.A} {
		bw.put(1, 1) // simple code
		bw.put(0, 1) // one symbol
		bw.put(1, 1) // its first (only) symbol takes 8 bits
		bw.put(uint32(v), 8)
	}
	bw.put(1, 1)
	bw.put(0, 1)
	bw.put(0, 1) // a 1-bit symbol
	bw.put(0, 1) // symbol 0
	payload := bw.bytes()

	chunk := make([]byte, 0, 8+len(payload)+1)
	chunk = append(chunk, "VP8L"...)
	chunk = binary.LittleEndian.AppendUint32(chunk, uint32(len(payload)))
	chunk = append(chunk, payload...)
	if len(payload)%2 == 1 {
		chunk = append(chunk, 0) // chunks are padded to an even size
	}
	out := make([]byte, 0, 12+len(chunk))
	out = append(out, "RIFF"...)
	out = binary.LittleEndian.AppendUint32(out, uint32(4+len(chunk)))
	out = append(out, "WEBP"...)
	return append(out, chunk...)
}

// bitWriter packs values least significant bit first, as VP8L reads them.
type bitWriter struct {
	buf  []byte
	bits uint64
	n    uint
}

func (b *bitWriter) put(v uint32, n uint) {
	b.bits |= uint64(v) << b.n
	b.n += n
	for b.n >= 8 {
		b.buf = append(b.buf, byte(b.bits))
		b.bits >>= 8
		b.n -= 8
	}
}

func (b *bitWriter) bytes() []byte {
	if b.n > 0 {
		b.buf = append(b.buf, byte(b.bits))
		b.bits, b.n = 0, 0
	}
	return b.buf
}
