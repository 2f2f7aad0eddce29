package docparse

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parseXLSX renders one "## <sheet name>" section per worksheet (workbook
// order, hidden sheets included, chart sheets skipped) with a Markdown table
// whose header is the first non-empty row. Shared strings, inline strings,
// numbers (dates by their number format), booleans and formula results are
// read; fully empty rows and columns are skipped; merged ranges repeat their
// top-left value. Sheets over MaxTableRows rows are cut with a note. Empty
// sheets are left out.
func (p *Parser) parseXLSX(ctx context.Context, name string, r io.ReaderAt, size int64) (Result, error) {
	o, main, err := p.openOOXML(name, extXLSX, r, size)
	if err != nil {
		return Result{}, err
	}
	wb, err := o.dom(main)
	if err != nil {
		return Result{}, err
	}
	rels, err := o.rels(main)
	if err != nil {
		return Result{}, err
	}
	c := &xlsxConv{o: o, maxRows: p.opts.MaxTableRows, date1904: attrOn(wb.path("workbookPr").attr("date1904"))}
	for _, rl := range rels {
		if rl.External || !o.has(rl.Target) {
			continue
		}
		switch {
		case strings.HasSuffix(rl.Type, "/sharedStrings"):
			err = c.loadSharedStrings(rl.Target)
		case strings.HasSuffix(rl.Type, "/styles"):
			err = c.loadStyles(rl.Target)
		}
		if err != nil {
			return Result{}, err
		}
	}
	var sections, warnings []string
	for _, sh := range wb.path("sheets").all("sheet") {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		rl, ok := rels[sh.relAttr("id")]
		if !ok || rl.External || !strings.HasSuffix(rl.Type, "/worksheet") || !o.has(rl.Target) {
			continue
		}
		table, dropped, err := c.sheet(ctx, rl.Target)
		if err != nil {
			return Result{}, err
		}
		if table == "" {
			continue
		}
		sheetName := strings.Join(strings.Fields(sh.attr("name")), " ")
		sec := "## " + sheetName + "\n\n" + table
		if dropped > 0 {
			sec += fmt.Sprintf("\n\n_(%d more rows not shown: the limit is %d rows per sheet)_", dropped, c.maxRows)
			warnings = append(warnings, fmt.Sprintf("sheet %q: %d rows over the %d-row limit left out", sheetName, dropped, c.maxRows))
		}
		sections = append(sections, sec)
	}
	return Result{Markdown: strings.Join(sections, "\n\n"), Warnings: warnings}, nil
}

type xlsxConv struct {
	o          *ooxml
	maxRows    int
	date1904   bool
	sst        []string
	dateStyles []bool // by cell style index (the s attribute)
}

func (c *xlsxConv) loadSharedStrings(part string) error {
	rc, err := c.o.open(part)
	if err != nil {
		return err
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.xmlErr(part, err)
		}
		if st, ok := tok.(xml.StartElement); ok && st.Name.Local == "si" {
			var si richText
			if err := dec.DecodeElement(&si, &st); err != nil {
				return c.xmlErr(part, err)
			}
			c.sst = append(c.sst, si.String())
		}
	}
}

func (c *xlsxConv) xmlErr(part string, err error) error {
	if isCoded(err) {
		return err
	}
	return coded(ErrCorrupt, "%s: part %s is not valid XML: %v", c.o.name, part, err)
}

// richText is a shared string or inline string: plain <t> or rich runs
// <r><t>; phonetic runs (<rPh>) are ignored.
type richText struct {
	T *string `xml:"t"`
	R []struct {
		T string `xml:"t"`
	} `xml:"r"`
}

func (r richText) String() string {
	if r.T != nil && len(r.R) == 0 {
		return *r.T
	}
	var b strings.Builder
	if r.T != nil {
		b.WriteString(*r.T)
	}
	for _, run := range r.R {
		b.WriteString(run.T)
	}
	return b.String()
}

func (c *xlsxConv) loadStyles(part string) error {
	root, err := c.o.dom(part)
	if err != nil {
		return err
	}
	custom := map[int]string{}
	for _, nf := range root.path("numFmts").all("numFmt") {
		if id, err := strconv.Atoi(nf.attr("numFmtId")); err == nil {
			custom[id] = nf.attr("formatCode")
		}
	}
	for _, xf := range root.path("cellXfs").all("xf") {
		id, _ := strconv.Atoi(xf.attr("numFmtId"))
		c.dateStyles = append(c.dateStyles, isDateFormat(id, custom[id]))
	}
	return nil
}

// isDateFormat recognises the built-in date/time formats (ECMA-376 §18.8.30,
// plus the CJK ones) and custom codes with date or time tokens.
func isDateFormat(id int, code string) bool {
	switch {
	case id >= 14 && id <= 22, id >= 27 && id <= 36, id >= 45 && id <= 47, id >= 50 && id <= 58:
		return true
	case code == "":
		return false
	}
	var b strings.Builder
	inQuote, inBracket := false, false
	for i := 0; i < len(code); i++ {
		ch := code[i]
		switch {
		case ch == '"':
			inQuote = !inQuote
		case inQuote:
		case ch == '[':
			inBracket = true
		case ch == ']':
			inBracket = false
		case inBracket:
		case ch == '\\' || ch == '_' || ch == '*':
			i++ // the next character is literal or padding
		default:
			b.WriteByte(ch)
		}
	}
	s := strings.ToLower(b.String())
	if s == "general" {
		return false
	}
	return strings.ContainsAny(s, "ymdhs")
}

type xlsxRow struct {
	idx   int
	cells map[int]string
}

// xlsxCell is the content of a <c> element.
type xlsxCell struct {
	V  *string  `xml:"v"`
	Is richText `xml:"is"`
}

// sheet streams a worksheet and returns its table and the number of
// non-empty rows left out over maxRows.
func (c *xlsxConv) sheet(ctx context.Context, part string) (string, int, error) {
	rc, err := c.o.open(part)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	var rows []*xlsxRow
	var merges []string
	var cur *xlsxRow
	dropped, rowIdx, col := 0, -1, -1
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", 0, err
			}
		}
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", 0, c.xmlErr(part, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "row":
				if v, err := strconv.Atoi(attrOf(t, "r")); err == nil && v > 0 {
					rowIdx = v - 1
				} else {
					rowIdx++
				}
				cur, col = &xlsxRow{idx: rowIdx, cells: map[int]string{}}, -1
			case "c":
				if r, ok := cellColumn(attrOf(t, "r")); ok {
					col = r
				} else {
					col++
				}
				var cell xlsxCell
				if err := dec.DecodeElement(&cell, &t); err != nil {
					return "", 0, c.xmlErr(part, err)
				}
				if cur != nil {
					if v := c.cellValue(attrOf(t, "t"), attrOf(t, "s"), cell); strings.TrimSpace(v) != "" {
						cur.cells[col] = v
					}
				}
			case "mergeCell":
				merges = append(merges, attrOf(t, "ref"))
			}
		case xml.EndElement:
			if t.Name.Local == "row" && cur != nil {
				if len(cur.cells) > 0 {
					if len(rows) < c.maxRows {
						rows = append(rows, cur)
					} else {
						dropped++
					}
				}
				cur = nil
			}
		}
	}
	applyMerges(rows, merges)
	return sheetTable(rows), dropped, nil
}

func attrOf(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// cellColumn returns the 0-based column of a reference like "AB12".
func cellColumn(ref string) (int, bool) {
	col, i := 0, 0
	for ; i < len(ref); i++ {
		ch := ref[i] | 0x20 // lower-case
		if ch < 'a' || ch > 'z' {
			break
		}
		col = col*26 + int(ch-'a'+1)
		if col > 1<<14 { // XFD is the last column
			return 0, false
		}
	}
	if i == 0 {
		return 0, false
	}
	return col - 1, true
}

// cellRef parses "B3" into 0-based row and column.
func cellRef(ref string) (row, col int, ok bool) {
	col, ok = cellColumn(ref)
	if !ok {
		return 0, 0, false
	}
	digits := strings.TrimLeft(ref, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz$")
	r, err := strconv.Atoi(strings.TrimPrefix(digits, "$"))
	if err != nil || r < 1 {
		return 0, 0, false
	}
	return r - 1, col, true
}

func (c *xlsxConv) cellValue(typ, style string, cell xlsxCell) string {
	v := ""
	if cell.V != nil {
		v = *cell.V
	}
	switch typ {
	case "s":
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || i < 0 || i >= len(c.sst) {
			return ""
		}
		return c.sst[i]
	case "inlineStr":
		return cell.Is.String()
	case "b":
		if strings.TrimSpace(v) == "1" {
			return "TRUE"
		}
		return "FALSE"
	case "e", "str", "d":
		return v
	}
	if v == "" {
		return ""
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return v
	}
	if s, err := strconv.Atoi(style); err == nil && s >= 0 && s < len(c.dateStyles) && c.dateStyles[s] {
		if d, ok := excelDate(f, c.date1904); ok {
			return d
		}
	}
	return formatNumber(f)
}

// formatNumber prints a cell number like Excel's General format does for
// ordinary values: at most 15 significant digits, no exponent for
// 1e-6 ≤ |x| < 1e15.
func formatNumber(f float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 15, 64), 64)
	if a := math.Abs(r); r == 0 || (a >= 1e-6 && a < 1e15) {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'g', -1, 64)
}

// excelDate converts a date serial number.
func excelDate(serial float64, date1904 bool) (string, bool) {
	if serial < 0 || serial > 2958466 { // after 9999-12-31
		return "", false
	}
	base := time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC) // absorbs the 1900 leap-year bug after Feb 1900
	if date1904 {
		base = time.Date(1904, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	days := math.Floor(serial)
	secs := math.Round((serial - days) * 86400)
	t := base.AddDate(0, 0, int(days)).Add(time.Duration(secs) * time.Second)
	switch {
	case secs == 0:
		return t.Format("2006-01-02"), true
	case days == 0 && !date1904:
		return t.Format("15:04:05"), true
	}
	return t.Format("2006-01-02 15:04:05"), true
}

// maxMergeWidth bounds how many columns one merged range may fill.
const maxMergeWidth = 256

// applyMerges copies each merged range's top-left value into the other
// cells of the range, on the rows that were kept.
func applyMerges(rows []*xlsxRow, merges []string) {
	if len(merges) == 0 || len(rows) == 0 {
		return
	}
	byIdx := make(map[int]*xlsxRow, len(rows))
	for _, r := range rows {
		byIdx[r.idx] = r
	}
	for _, m := range merges {
		from, to, ok := strings.Cut(m, ":")
		if !ok {
			continue
		}
		r1, c1, ok1 := cellRef(from)
		r2, c2, ok2 := cellRef(to)
		if !ok1 || !ok2 || r2 < r1 || c2 < c1 {
			continue
		}
		top, ok := byIdx[r1]
		if !ok {
			continue
		}
		v, ok := top.cells[c1]
		if !ok {
			continue
		}
		c2 = min(c2, c1+maxMergeWidth)
		for _, r := range rows {
			if r.idx < r1 || r.idx > r2 {
				continue
			}
			for col := c1; col <= c2; col++ {
				if _, set := r.cells[col]; !set {
					r.cells[col] = v
				}
			}
		}
	}
}

// sheetTable renders the kept rows over the columns that hold a value.
func sheetTable(rows []*xlsxRow) string {
	used := map[int]bool{}
	for _, r := range rows {
		for col := range r.cells {
			used[col] = true
		}
	}
	if len(used) == 0 {
		return ""
	}
	cols := make([]int, 0, len(used))
	for col := range used {
		cols = append(cols, col)
	}
	slices.Sort(cols)
	slices.SortStableFunc(rows, func(a, b *xlsxRow) int { return a.idx - b.idx })
	grid := make([][]string, 0, len(rows))
	for _, r := range rows {
		line := make([]string, len(cols))
		for i, col := range cols {
			line[i] = r.cells[col]
		}
		grid = append(grid, line)
	}
	return markdownTable(grid)
}
