package pdf

import (
	"bytes"
	"math"
	"slices"
	"sort"
	"unicode"
	"unicode/utf8"
)

// Reading order. Glyphs (in content-stream order, in the frame of their
// text direction) become words; words are grouped into rows by baseline;
// a coverage histogram of the words over x finds gutters — x ranges that
// little text crosses between two masses of text — and the rows are cut
// there into column segments. Rows that bridge a gutter (titles, full-width
// paragraphs, headers, footers) break the page into bands; each band is
// read column by column, top to bottom. Lines are then joined into
// paragraphs by their vertical spacing, with conservative de-hyphenation.
//
// Everything is O(n log n) in the number of glyphs: sorting plus linear
// passes; the histogram is bounded by maxBins.

// Layout tuning, as fractions of the font size (em) unless noted.
const (
	wordGap        = 0.13 // a horizontal gap wider than this separates words
	spaceGap       = 0.06 // the same, after a space character (often squeezed by word spacing)
	baselineSlack  = 0.2  // a baseline change larger than this ends a word
	rowSlack       = 0.5  // words whose baselines differ less share a row
	dupSlack       = 0.2  // text repeated within this distance is overprint (fake bold)
	gutterMin      = 0.8  // minimum gutter width
	gutterCore     = 0.4  // minimum width of the gutter's emptiest part
	gutterBridge   = 0.6  // a gap across a gutter narrower than this (and than 80% of the gutter) bridges it
	valleyLevel    = 0.45 // a gutter's coverage is below this fraction of the typical column's
	columnMinWidth = 7.0  // a text column is at least this wide
	columnMinLines = 3
	paraGap        = 1.45 // a baseline distance above this times the line pitch starts a paragraph
	maxBins        = 4096
	maxGutters     = 8
)

type word struct {
	x0, x1, y, size float64
	rot             uint8
	spaceBefore     bool // an explicit space glyph preceded it in the stream
	start, end      int  // text in layout.buf
}

type row struct {
	lo, hi  int // range of layout.idx, sorted by x0
	y, size float64
}

type segment struct {
	row    int
	lo, hi int // range of layout.idx
	col    int // column index; -1 when it bridges a gutter
	x0, x1 float64
}

type gutter struct{ x0, x1, mid float64 }

type line struct {
	start, end int // text in layout.lbuf
	x0, x1     float64
	y, size    float64
	group      int // rotation group
	band       int
	col        int // -1 for lines that span columns
	colRight   float64
}

// layout is per-document scratch space reused across pages.
type layout struct {
	buf    []byte
	words  []word
	idx    []int
	rows   []row
	segs   []segment
	cov    []float64
	sizes  []float64
	lines  []line
	lbuf   []byte
	out    []byte
	band   int
	groups int
}

// page turns one page's glyphs into text.
func (l *layout) page(gs []glyph) string {
	l.buildWords(gs)
	l.lines, l.lbuf, l.band, l.groups = l.lines[:0], l.lbuf[:0], 0, 0
	if len(l.words) == 0 {
		return ""
	}
	var count [4]int
	for i := range l.words {
		count[l.words[i].rot]++
	}
	rots := []uint8{0, 1, 2, 3}
	sort.SliceStable(rots, func(i, j int) bool { return count[rots[i]] > count[rots[j]] })
	for _, rot := range rots {
		if count[rot] == 0 {
			continue
		}
		l.idx = l.idx[:0]
		for i := range l.words {
			if l.words[i].rot == rot {
				l.idx = append(l.idx, i)
			}
		}
		l.flow()
		l.groups++
	}
	return l.render()
}

// buildWords groups glyphs into words in stream order.
func (l *layout) buildWords(gs []glyph) {
	l.buf, l.words = l.buf[:0], l.words[:0]
	var cur word
	var last glyph
	open, space := false, false
	flush := func() {
		if !open {
			return
		}
		open = false
		text := l.buf[cur.start:cur.end]
		for k := len(l.words) - 1; k >= 0 && k >= len(l.words)-4; k-- {
			p := &l.words[k]
			if p.rot == cur.rot && math.Abs(p.x0-cur.x0) < dupSlack*cur.size && math.Abs(p.y-cur.y) < dupSlack*cur.size &&
				bytes.Equal(l.buf[p.start:p.end], text) {
				l.buf = l.buf[:cur.start]
				return
			}
		}
		l.words = append(l.words, cur)
	}
	for i := range gs {
		g := &gs[i]
		if g.space {
			flush()
			space = true
			continue
		}
		if open {
			size := max(last.size, g.size)
			gap := g.x - (last.x + last.w)
			if g.text == last.text && math.Abs(g.x-last.x) < 0.1*size && math.Abs(g.y-last.y) < 0.1*size {
				continue // the same glyph drawn twice
			}
			if g.rot != cur.rot || math.Abs(g.y-last.y) > baselineSlack*size || gap > wordGap*size || gap < -0.6*size {
				flush()
			}
		}
		if !open {
			cur = word{x0: g.x, x1: g.x + g.w, y: g.y, size: g.size, rot: g.rot, spaceBefore: space, start: len(l.buf)}
			open = true
		} else {
			cur.x0 = min(cur.x0, g.x)
			cur.x1 = max(cur.x1, g.x+g.w)
			cur.size = max(cur.size, g.size)
		}
		l.buf = append(l.buf, g.text...)
		cur.end = len(l.buf)
		last = *g
		space = false
	}
	flush()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// flow lays out the words in l.idx (one text direction) and appends their
// lines in reading order.
func (l *layout) flow() {
	ws := l.words
	idx := l.idx
	l.sizes = l.sizes[:0]
	for _, i := range idx {
		l.sizes = append(l.sizes, ws[i].size)
	}
	em := median(l.sizes)
	if em <= 0 {
		em = 1
	}

	// Rows: words by baseline, top to bottom.
	sort.Slice(idx, func(a, b int) bool {
		wa, wb := &ws[idx[a]], &ws[idx[b]]
		if wa.y != wb.y {
			return wa.y > wb.y
		}
		return wa.x0 < wb.x0
	})
	l.rows = l.rows[:0]
	for k, i := range idx {
		w := &ws[i]
		if n := len(l.rows); n > 0 {
			r := &l.rows[n-1]
			if r.y-w.y <= rowSlack*min(r.size, w.size) {
				r.hi = k + 1
				if w.size > r.size {
					r.y, r.size = w.y, w.size
				}
				continue
			}
		}
		l.rows = append(l.rows, row{lo: k, hi: k + 1, y: w.y, size: w.size})
	}
	for _, r := range l.rows {
		part := idx[r.lo:r.hi]
		if len(part) > 1 {
			sort.Slice(part, func(a, b int) bool { return ws[part[a]].x0 < ws[part[b]].x0 })
		}
	}

	gutters := l.findGutters(em)
	for {
		l.segment(gutters)
		bad := l.badColumn(gutters, em)
		if bad < 0 {
			break
		}
		// Merge the column that is not a text column with a neighbour:
		// drop the narrower of the gutters beside it.
		drop := bad // the gutter on its right
		if bad == len(gutters) || (bad > 0 && gutters[bad-1].x1-gutters[bad-1].x0 < gutters[bad].x1-gutters[bad].x0) {
			drop = bad - 1
		}
		gutters = append(gutters[:drop], gutters[drop+1:]...)
	}
	l.emit(gutters)
}

// findGutters returns the x ranges, left to right, that look like the space
// between text columns.
func (l *layout) findGutters(em float64) []gutter {
	ws, idx := l.words, l.idx
	if len(idx) < 20 || len(l.rows) < 2*columnMinLines {
		return nil
	}
	minX, maxX := math.Inf(1), math.Inf(-1)
	for _, i := range idx {
		minX = min(minX, ws[i].x0)
		maxX = max(maxX, ws[i].x1)
	}
	width := maxX - minX
	if width < 2*columnMinWidth*em {
		return nil
	}
	binW := max(1.0, width/maxBins)
	nb := int(width/binW) + 2
	if cap(l.cov) < nb+1 {
		l.cov = make([]float64, nb+1)
	}
	cov := l.cov[:nb+1]
	clear(cov)
	for _, i := range idx {
		w := &ws[i]
		b0 := int((w.x0 - minX) / binW)
		b1 := int((w.x1 - minX) / binW)
		cov[b0]++ // count lines, whatever their size: a big title is one line
		cov[b1+1]--
	}
	for b := 1; b < nb; b++ {
		cov[b] += cov[b-1]
	}
	cov = cov[:nb]
	// The typical coverage inside a column: a high quantile, robust against
	// a few stacked headings.
	l.sizes = append(l.sizes[:0], cov...)
	slices.Sort(l.sizes)
	peak := l.sizes[len(l.sizes)*9/10]
	level := valleyLevel * peak
	minBins := int(gutterMin * em / binW)
	var out []gutter
	for b := 0; b < nb; {
		if cov[b] > level {
			b++
			continue
		}
		start := b
		for b < nb && cov[b] <= level {
			b++
		}
		if start == 0 || b >= nb || b-start < max(minBins, 1) {
			continue
		}
		// The valley's edges are soft where a column is ragged; its core,
		// where coverage is at its minimum (only spanning lines), is the
		// real gap between the columns. Spanning lines (a title, a byline)
		// cover the gutter with words and word spaces, so the minimum may
		// be a single word space of a title: allow two lines of coverage
		// above it, or the core shrinks to that space and the columns are
		// read across.
		lo := cov[start]
		for k := start; k < b; k++ {
			lo = min(lo, cov[k])
		}
		tol := max(0.05*peak, 2)
		cs, ce := 0, 0
		for k := start; k < b; {
			if cov[k] > lo+tol {
				k++
				continue
			}
			j := k
			for j < b && cov[j] <= lo+tol {
				j++
			}
			if j-k > ce-cs {
				cs, ce = k, j
			}
			k = j
		}
		if float64(ce-cs)*binW < gutterCore*em {
			continue
		}
		x0, x1 := minX+float64(cs)*binW, minX+float64(ce)*binW
		out = append(out, gutter{x0: x0, x1: x1, mid: (x0 + x1) / 2})
	}
	if len(out) > maxGutters {
		// Keep the widest: more are a table or a form, and the column
		// check below is quadratic in their number.
		sort.Slice(out, func(i, j int) bool { return out[i].x1-out[i].x0 > out[j].x1-out[j].x0 })
		out = out[:maxGutters]
		sort.Slice(out, func(i, j int) bool { return out[i].x0 < out[j].x0 })
	}
	return out
}

// segment cuts every row at the gutters it does not bridge.
func (l *layout) segment(gutters []gutter) {
	ws, idx := l.words, l.idx
	l.segs = l.segs[:0]
	across := func(a, b *word) *gutter { // the gutter between two neighbours
		for gi := range gutters {
			if g := &gutters[gi]; a.x1 <= g.mid && b.x0 >= g.mid {
				return g
			}
		}
		return nil
	}
	for ri, r := range l.rows {
		// The row's ordinary word gaps, to tell a gap that is just another
		// word space (a title across the gutter) from a column gap.
		l.sizes = l.sizes[:0]
		for k := r.lo; k+1 < r.hi; k++ {
			a, b := &ws[idx[k]], &ws[idx[k+1]]
			if across(a, b) == nil {
				l.sizes = append(l.sizes, b.x0-a.x1)
			}
		}
		typical := -1.0
		if len(l.sizes) >= 2 {
			typical = median(l.sizes)
		}
		start := r.lo
		spans := false
		for k := r.lo; k < r.hi; k++ {
			w := &ws[idx[k]]
			for _, g := range gutters {
				if w.x0 < g.mid && w.x1 > g.mid {
					spans = true // a word across the gutter
				}
			}
			if k+1 == r.hi {
				break
			}
			nx := &ws[idx[k+1]]
			g := across(w, nx)
			if g == nil {
				continue
			}
			gap := nx.x0 - w.x1
			narrow := gap < gutterBridge*max(w.size, nx.size) && gap < 0.8*(g.x1-g.x0)
			if narrow || gap <= 2*typical {
				spans = true // words close together across the gutter
				continue
			}
			l.addSegment(ri, start, k+1, spans, gutters)
			start, spans = k+1, false
		}
		l.addSegment(ri, start, r.hi, spans, gutters)
	}
}

func (l *layout) addSegment(ri, lo, hi int, spans bool, gutters []gutter) {
	ws, idx := l.words, l.idx
	s := segment{row: ri, lo: lo, hi: hi, x0: ws[idx[lo]].x0, x1: ws[idx[lo]].x1}
	for k := lo; k < hi; k++ {
		s.x0 = min(s.x0, ws[idx[k]].x0)
		s.x1 = max(s.x1, ws[idx[k]].x1)
	}
	if spans {
		s.col = -1
	} else {
		c := (s.x0 + s.x1) / 2
		for _, g := range gutters {
			if c > g.mid {
				s.col++
			}
		}
	}
	l.segs = append(l.segs, s)
}

// badColumn returns the index of the first column that does not look like
// a column of running text (too narrow, too few lines, lines that do not
// fill it: a table, a list of labels), or -1.
func (l *layout) badColumn(gutters []gutter, em float64) int {
	if len(gutters) == 0 {
		return -1
	}
	for c := 0; c <= len(gutters); c++ {
		n := 0
		x0, x1 := math.Inf(1), math.Inf(-1)
		for _, s := range l.segs {
			if s.col == c {
				n++
				x0, x1 = min(x0, s.x0), max(x1, s.x1)
			}
		}
		w := x1 - x0
		if n < columnMinLines || w < columnMinWidth*em {
			return c
		}
	}
	return -1
}

// emit appends the lines of the segments in reading order: spanning
// segments in place, the column segments between them band by band,
// column by column.
func (l *layout) emit(gutters []gutter) {
	ncol := len(gutters) + 1
	colRight := make([]float64, ncol)
	for _, s := range l.segs {
		if s.col >= 0 {
			colRight[s.col] = max(colRight[s.col], s.x1)
		}
	}
	var band []int // column segments since the last spanning row
	flush := func() {
		for c := 0; c < ncol; c++ {
			for _, k := range band {
				if s := &l.segs[k]; s.col == c {
					l.addLine(s, colRight[c])
				}
			}
		}
		band = band[:0]
		l.band++
	}
	for k := 0; k < len(l.segs); {
		end := k + 1 // the segments of one row are adjacent
		for end < len(l.segs) && l.segs[end].row == l.segs[k].row {
			end++
		}
		spanning := false
		for j := k; j < end; j++ {
			spanning = spanning || l.segs[j].col < 0
		}
		if spanning {
			flush()
			for j := k; j < end; j++ {
				if s := &l.segs[j]; s.col < 0 {
					l.addLine(s, 0)
				}
			}
			l.band++
		}
		for j := k; j < end; j++ {
			if l.segs[j].col >= 0 {
				band = append(band, j)
			}
		}
		k = end
	}
	flush()
}

// addLine assembles the text of one segment into a line.
func (l *layout) addLine(s *segment, colRight float64) {
	ws, idx := l.words, l.idx
	ln := line{start: len(l.lbuf), x0: s.x0, x1: s.x1, y: l.rows[s.row].y, group: l.groups, band: l.band, col: s.col, colRight: colRight}
	var prev *word
	for k := s.lo; k < s.hi; k++ {
		w := &ws[idx[k]]
		ln.size = max(ln.size, w.size)
		text := l.buf[w.start:w.end]
		if prev != nil {
			gap := w.x0 - prev.x1
			size := max(prev.size, w.size)
			sp := gap > wordGap*size || gap < -0.5*size || (w.spaceBefore && gap > spaceGap*size)
			if sp && isCJK(lastRune(l.lbuf[ln.start:])) && isCJK(firstRune(text)) {
				sp = false
			}
			if sp {
				l.lbuf = append(l.lbuf, ' ')
			}
		}
		l.lbuf = append(l.lbuf, text...)
		prev = w
	}
	ln.end = len(l.lbuf)
	if ln.end > ln.start {
		l.lines = append(l.lines, ln)
	}
}

// render joins the lines into the page text: a blank line between
// paragraphs, hyphenated line ends joined.
func (l *layout) render() string {
	lines := l.lines
	if len(lines) == 0 {
		return ""
	}
	// The typical distance between consecutive baselines.
	l.sizes = l.sizes[:0]
	for i := 1; i < len(lines); i++ {
		p, c := &lines[i-1], &lines[i]
		if p.group == c.group && p.col == c.col && p.band == c.band {
			if d := p.y - c.y; d > 0.5*c.size && d < 3*c.size {
				l.sizes = append(l.sizes, d)
			}
		}
	}
	pitch := median(l.sizes)
	out := l.out[:0]
	for i := range lines {
		ln := &lines[i]
		text := l.lbuf[ln.start:ln.end]
		if i > 0 {
			p := &lines[i-1]
			para := false
			switch {
			case ln.group != p.group:
				para = true
			case p.col >= 0 && ln.col >= 0 && p.band == ln.band && p.col != ln.col:
				// Column break: a paragraph ends there only if the column's
				// last line stops short.
				para = p.x1 < p.colRight-2.5*p.size
			default:
				d := p.y - ln.y
				size := max(p.size, ln.size)
				lim := paraGap * max(pitch, 1.15*size)
				para = d <= 0 || d > lim || size > 1.25*min(p.size, ln.size)
			}
			switch {
			case para:
				out = append(out, '\n', '\n')
			default:
				if rest, ok := hyphenated(out); ok && startsLower(text) {
					out = rest
				} else {
					out = append(out, '\n')
				}
			}
		}
		out = appendClean(out, text)
	}
	l.out = out
	if bytes.Contains(out, []byte("\u00ad")) { // soft hyphens at line ends that joined nothing
		out = bytes.ReplaceAll(out, []byte("\u00ad\n"), []byte("-\n"))
		if lastRune(out) == 0xad {
			out = append(out[:len(out)-2], '-')
		}
	}
	return string(out)
}

func startsLower(b []byte) bool {
	r, _ := utf8.DecodeRune(b)
	return unicode.IsLower(r)
}

// appendClean appends a line, dropping soft hyphens except a final one
// (which may mark a hyphenated line end).
func appendClean(out, text []byte) []byte {
	if !bytes.Contains(text, []byte("\u00ad")) {
		return append(out, text...)
	}
	last := len(text)
	if lastRune(text) == 0xad {
		last -= 2
	}
	out = append(out, bytes.ReplaceAll(text[:last], []byte("\u00ad"), nil)...)
	return append(out, text[last:]...)
}
