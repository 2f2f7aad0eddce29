package pdf

import (
	"sort"
	"unicode/utf16"
)

// codeRange is one codespace range of a CMap: codes of n bytes whose bytes
// each lie between the corresponding bytes of lo and hi.
type codeRange struct {
	n      int
	lo, hi [4]byte
}

// uniRange is a bfrange of a ToUnicode CMap: codes lo..hi map to dst with its
// last UTF-16 unit incremented by code-lo, or to arr[code-lo].
type uniRange struct {
	lo, hi uint32
	dst    []uint16
	arr    []string
}

// cidRange is a cidrange of an encoding CMap.
type cidRange struct {
	lo, hi uint32
	cid    uint32
}

// cmapData is what we keep of a parsed CMap (ToUnicode or encoding).
type cmapData struct {
	space   []codeRange
	chars   map[uint32]string // bfchar
	ranges  []uniRange        // bfrange, sorted by lo
	cids    []cidRange        // cidrange and cidchar, sorted by lo
	useCMap string            // name given to usecmap (a predefined CMap)
}

func codeOf(b []byte) uint32 {
	var c uint32
	for _, x := range b {
		c = c<<8 | uint32(x)
	}
	return c
}

// parseCMap reads the parts of a CMap that matter for text extraction.
// Malformed entries are skipped.
func parseCMap(data []byte) *cmapData {
	m := &cmapData{chars: make(map[uint32]string)}
	r := newOpReader(data)
	for {
		op, ok := r.next()
		if !ok {
			break
		}
		// The operands of a begin…end block all precede its end… operator.
		pending := r.args
		switch string(op) {
		case "usecmap":
			if len(r.args) > 0 && r.args[0].kind == opdName {
				m.useCMap = string(r.args[0].s)
			}
		case "endcodespacerange":
			for i := 0; i+1 < len(pending); i += 2 {
				lo, hi := pending[i].s, pending[i+1].s
				if len(lo) == 0 || len(lo) > 4 || len(lo) != len(hi) {
					continue
				}
				cr := codeRange{n: len(lo)}
				copy(cr.lo[:], lo)
				copy(cr.hi[:], hi)
				m.space = append(m.space, cr)
			}
		case "endbfchar":
			for i := 0; i+1 < len(pending); i += 2 {
				src, dst := pending[i], pending[i+1]
				if src.kind != opdStr || len(src.s) > 4 {
					continue
				}
				switch dst.kind {
				case opdStr:
					m.chars[codeOf(src.s)] = utf16BE(dst.s)
				case opdName:
					if ru, ok := glyphNameText(string(dst.s)); ok {
						m.chars[codeOf(src.s)] = ru
					}
				}
			}
		case "endbfrange":
			for i := 0; i+2 < len(pending); i += 3 {
				lo, hi, dst := pending[i], pending[i+1], pending[i+2]
				if lo.kind != opdStr || hi.kind != opdStr || len(lo.s) > 4 || len(hi.s) > 4 {
					continue
				}
				ur := uniRange{lo: codeOf(lo.s), hi: codeOf(hi.s)}
				if ur.hi < ur.lo {
					continue
				}
				switch dst.kind {
				case opdStr:
					ur.dst = utf16Units(dst.s)
					if len(ur.dst) == 0 {
						continue
					}
				case opdArray:
					for _, e := range r.elems[dst.lo:dst.hi] {
						ur.arr = append(ur.arr, utf16BE(e.s))
					}
				default:
					continue
				}
				m.ranges = append(m.ranges, ur)
			}
		case "endcidrange":
			for i := 0; i+2 < len(pending); i += 3 {
				lo, hi, cid := pending[i], pending[i+1], pending[i+2]
				if lo.kind != opdStr || hi.kind != opdStr || cid.kind != opdNum {
					continue
				}
				m.cids = append(m.cids, cidRange{lo: codeOf(lo.s), hi: codeOf(hi.s), cid: uint32(cid.num)})
			}
		case "endcidchar":
			for i := 0; i+1 < len(pending); i += 2 {
				src, cid := pending[i], pending[i+1]
				if src.kind != opdStr || cid.kind != opdNum {
					continue
				}
				c := codeOf(src.s)
				m.cids = append(m.cids, cidRange{lo: c, hi: c, cid: uint32(cid.num)})
			}
		default:
			// Operands of begin…end blocks arrive before their end… operator
			// but may be split across other keywords ("def" etc. never occur
			// inside); keep anything that precedes an unknown operator only
			// while inside a block.
			if len(pending) > 0 || len(r.args) > 0 {
			}
		}
	}
	sort.Slice(m.ranges, func(i, j int) bool { return m.ranges[i].lo < m.ranges[j].lo })
	sort.Slice(m.cids, func(i, j int) bool { return m.cids[i].lo < m.cids[j].lo })
	return m
}

// lookup returns the Unicode text of code from bfchar/bfrange entries.
func (m *cmapData) lookup(code uint32) (string, bool) {
	if s, ok := m.chars[code]; ok {
		return s, true
	}
	rs := m.ranges
	// The last range starting at or before code; ranges rarely overlap, so
	// check a few predecessors too.
	i := sort.Search(len(rs), func(i int) bool { return rs[i].lo > code }) - 1
	for k := i; k >= 0 && k > i-4; k-- {
		ur := &rs[k]
		if code < ur.lo || code > ur.hi {
			continue
		}
		off := code - ur.lo
		if ur.arr != nil {
			if int(off) < len(ur.arr) {
				return ur.arr[off], true
			}
			return "", false
		}
		units := make([]uint16, len(ur.dst))
		copy(units, ur.dst)
		units[len(units)-1] += uint16(off)
		return string(utf16.Decode(units)), true
	}
	return "", false
}

// cid maps a code to a CID through cidrange/cidchar entries.
func (m *cmapData) cid(code uint32) (uint32, bool) {
	cs := m.cids
	i := sort.Search(len(cs), func(i int) bool { return cs[i].lo > code }) - 1
	for k := i; k >= 0 && k > i-4; k-- {
		if code >= cs[k].lo && code <= cs[k].hi {
			return cs[k].cid + code - cs[k].lo, true
		}
	}
	return 0, false
}

func utf16Units(b []byte) []uint16 {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		u = append(u, uint16(b[i])<<8|uint16(b[i+1]))
	}
	if len(b)%2 == 1 { // a single byte: treat as a code unit
		u = append(u, uint16(b[len(b)-1]))
	}
	return u
}

func utf16BE(b []byte) string {
	if len(b) == 1 {
		return string(rune(b[0]))
	}
	return string(utf16.Decode(utf16Units(b)))
}

// splitCode takes the next code off s according to the codespace ranges: the
// shortest range that matches wins; bytes no range matches are taken one by
// one (the spec's "partial match" rule is not worth its complexity here).
func splitCode(space []codeRange, s []byte) (uint32, int) {
	for n := 1; n <= 4 && n <= len(s); n++ {
		for i := range space {
			cr := &space[i]
			if cr.n != n {
				continue
			}
			match := true
			for k := 0; k < n; k++ {
				if s[k] < cr.lo[k] || s[k] > cr.hi[k] {
					match = false
					break
				}
			}
			if match {
				return codeOf(s[:n]), n
			}
		}
	}
	return uint32(s[0]), 1
}
