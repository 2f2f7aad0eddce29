package docparse

import (
	"context"
	"io"
	"strconv"
	"strings"
)

// parseDOCX reads word/document.xml: headings (Title, Heading 1–6, outline
// levels) become ATX headings, numbered paragraphs become "- " or "1. " list
// items, runs keep bold/italic, hyperlinks become links, tables become
// Markdown tables (merged cells repeat their text, as Docling does) and
// pictures are extracted (word/media/x.png → Image "media/x.png") and linked
// where they appear. Text boxes follow the paragraph that anchors them.
// Headers, footers, footnotes and comments are left out, as in the original.
func (p *Parser) parseDOCX(ctx context.Context, name string, r io.ReaderAt, size int64) (Result, error) {
	o, main, err := p.openOOXML(name, extDOCX, r, size)
	if err != nil {
		return Result{}, err
	}
	doc, err := o.dom(main)
	if err != nil {
		return Result{}, err
	}
	rels, err := o.rels(main)
	if err != nil {
		return Result{}, err
	}
	c := &docxConv{o: o, rels: rels, imgs: p.newImageSet(), counters: map[string][]int{}}
	for _, rl := range rels {
		var err error
		switch {
		case rl.External || !o.has(rl.Target): // optional parts may be missing
		case strings.HasSuffix(rl.Type, "/styles"):
			err = c.loadStyles(rl.Target)
		case strings.HasSuffix(rl.Type, "/numbering"):
			err = c.loadNumbering(rl.Target)
		}
		if err != nil {
			return Result{}, err
		}
	}
	body := doc.child("body")
	if body == nil {
		return Result{}, coded(ErrCorrupt, "%s: %s has no document body", name, main)
	}
	blocks, err := c.blocks(ctx, body.Kids, false)
	if err != nil {
		return Result{}, err
	}
	return Result{Markdown: joinBlocks(blocks), Images: c.imgs.images, Warnings: c.imgs.warnings}, nil
}

// block is one Markdown block; consecutive list items join with a single
// newline so they stay one list.
type block struct {
	text string
	list bool
}

func joinBlocks(blocks []block) string {
	var b strings.Builder
	for i, bl := range blocks {
		if i > 0 {
			if bl.list && blocks[i-1].list {
				b.WriteString("\n")
			} else {
				b.WriteString("\n\n")
			}
		}
		b.WriteString(bl.text)
	}
	return b.String()
}

type docxStyle struct {
	name, basedOn string
	outline       int // 0-based outline level, -1 when none
	numID         string
	ilvl          int
}

type docxLevel struct {
	format string // numFmt: bullet, decimal, lowerLetter, …
	start  int
}

type docxConv struct {
	o         *ooxml
	rels      map[string]rel
	imgs      *imageSet
	styles    map[string]docxStyle
	numFormat map[string]map[int]docxLevel // numId → ilvl → level
	counters  map[string][]int             // numId → running number per level
}

func (c *docxConv) loadStyles(part string) error {
	root, err := c.o.dom(part)
	if err != nil {
		return err
	}
	c.styles = map[string]docxStyle{}
	for _, s := range root.all("style") {
		st := docxStyle{
			name:    s.path("name").attr("val"),
			basedOn: s.path("basedOn").attr("val"),
			outline: -1,
		}
		if ol := s.path("pPr", "outlineLvl"); ol != nil {
			if v, err := strconv.Atoi(ol.attr("val")); err == nil {
				st.outline = v
			}
		}
		if np := s.path("pPr", "numPr"); np != nil {
			st.numID = np.path("numId").attr("val")
			st.ilvl, _ = strconv.Atoi(np.path("ilvl").attr("val"))
		}
		c.styles[s.attr("styleId")] = st
	}
	return nil
}

func (c *docxConv) loadNumbering(part string) error {
	root, err := c.o.dom(part)
	if err != nil {
		return err
	}
	abstract := map[string]map[int]docxLevel{}
	for _, an := range root.all("abstractNum") {
		levels := map[int]docxLevel{}
		for _, lvl := range an.all("lvl") {
			i, _ := strconv.Atoi(lvl.attr("ilvl"))
			start, err := strconv.Atoi(lvl.path("start").attr("val"))
			if err != nil {
				start = 1
			}
			levels[i] = docxLevel{format: lvl.path("numFmt").attr("val"), start: start}
		}
		abstract[an.attr("abstractNumId")] = levels
	}
	c.numFormat = map[string]map[int]docxLevel{}
	for _, num := range root.all("num") {
		c.numFormat[num.attr("numId")] = abstract[num.path("abstractNumId").attr("val")]
	}
	return nil
}

// styleChain walks a paragraph style and the styles it is based on.
func (c *docxConv) styleChain(id string, fn func(docxStyle) bool) {
	for range 16 { // basedOn cycles exist in the wild
		st, ok := c.styles[id]
		if !ok || fn(st) {
			return
		}
		id = st.basedOn
	}
}

// headingLevel returns 1–6 for a heading paragraph and 0 otherwise.
func (c *docxConv) headingLevel(pPr *xnode) int {
	if ol := pPr.child("outlineLvl"); ol != nil {
		if v, err := strconv.Atoi(ol.attr("val")); err == nil && v < 9 {
			return min(v+1, 6)
		}
	}
	id := pPr.path("pStyle").attr("val")
	level := styleHeading(id, "")
	c.styleChain(id, func(st docxStyle) bool {
		if level == 0 {
			level = styleHeading("", st.name)
		}
		if level == 0 && st.outline >= 0 && st.outline < 9 {
			level = min(st.outline+1, 6)
		}
		return level > 0
	})
	return level
}

// styleHeading recognises the built-in heading styles by id ("Heading2") or
// name ("heading 2", "Title"). Localised Word keeps English style names.
func styleHeading(id, name string) int {
	for _, s := range []string{id, name} {
		s = strings.ToLower(strings.ReplaceAll(s, " ", ""))
		if s == "title" {
			return 1
		}
		if n, ok := strings.CutPrefix(s, "heading"); ok {
			if v, err := strconv.Atoi(n); err == nil && v >= 1 {
				return min(v, 6)
			}
		}
	}
	return 0
}

// listMarker returns the list marker and nesting level of a numbered
// paragraph, or "" for other paragraphs.
func (c *docxConv) listMarker(pPr *xnode) (string, int) {
	numID, ilvl := "", 0
	if np := pPr.child("numPr"); np != nil {
		numID = np.path("numId").attr("val")
		ilvl, _ = strconv.Atoi(np.path("ilvl").attr("val"))
	} else {
		c.styleChain(pPr.path("pStyle").attr("val"), func(st docxStyle) bool {
			numID, ilvl = st.numID, st.ilvl
			return numID != ""
		})
	}
	if numID == "" || numID == "0" {
		return "", 0
	}
	ilvl = min(max(ilvl, 0), 8)
	lvl := c.numFormat[numID][ilvl]
	switch lvl.format {
	case "bullet", "none", "":
		return "- ", ilvl
	}
	cs := c.counters[numID]
	if cs == nil {
		cs = make([]int, 9)
		c.counters[numID] = cs
	}
	if cs[ilvl] == 0 {
		cs[ilvl] = max(lvl.start, 0)
	} else {
		cs[ilvl]++
	}
	for i := ilvl + 1; i < len(cs); i++ {
		cs[i] = 0
	}
	return strconv.Itoa(cs[ilvl]) + ". ", ilvl
}

// blocks renders body-level content. In a table cell (inCell) headings and
// list markers are dropped and nested tables are flattened to text.
func (c *docxConv) blocks(ctx context.Context, kids []*xnode, inCell bool) ([]block, error) {
	var out []block
	for _, k := range kids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch k.Local {
		case "p":
			bs, err := c.paragraph(ctx, k, inCell)
			if err != nil {
				return nil, err
			}
			out = append(out, bs...)
		case "tbl":
			grid, err := c.table(ctx, k)
			if err != nil {
				return nil, err
			}
			if inCell {
				var cells []string
				for _, row := range grid {
					cells = append(cells, strings.Join(row, " "))
				}
				out = append(out, block{text: strings.Join(cells, " ")})
			} else if t := markdownTable(grid); t != "" {
				out = append(out, block{text: t})
			}
		case "sdt":
			bs, err := c.blocks(ctx, k.path("sdtContent").kids(), inCell)
			if err != nil {
				return nil, err
			}
			out = append(out, bs...)
		case "customXml", "ins", "moveTo":
			bs, err := c.blocks(ctx, k.Kids, inCell)
			if err != nil {
				return nil, err
			}
			out = append(out, bs...)
		case "AlternateContent":
			if alt := alternate(k); alt != nil {
				bs, err := c.blocks(ctx, alt.Kids, inCell)
				if err != nil {
					return nil, err
				}
				out = append(out, bs...)
			}
		}
	}
	return out, nil
}

// paragraph renders a w:p and the text boxes anchored in it.
func (c *docxConv) paragraph(ctx context.Context, p *xnode, inCell bool) ([]block, error) {
	var segs []seg
	var boxes []*xnode
	if err := c.inlines(p, &segs, &boxes); err != nil {
		return nil, err
	}
	pPr := p.child("pPr")
	var out []block
	level := 0
	if !inCell {
		level = c.headingLevel(pPr)
	}
	text := strings.TrimSpace(renderSegs(segs, level == 0))
	switch {
	case text == "":
	case level > 0:
		out = append(out, block{text: strings.Repeat("#", level) + " " + strings.Join(strings.Fields(text), " ")})
	case inCell:
		out = append(out, block{text: text})
	default:
		if marker, ilvl := c.listMarker(pPr); marker != "" {
			out = append(out, block{text: strings.Repeat("    ", ilvl) + marker + text, list: true})
		} else {
			out = append(out, block{text: text})
		}
	}
	for _, box := range boxes {
		bs, err := c.blocks(ctx, box.Kids, inCell)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	return out, nil
}

// seg is a piece of inline text; raw segments (links, images, math) are
// already Markdown.
type seg struct {
	text         string
	bold, italic bool
	raw          bool
}

// renderSegs joins segments, merging neighbours with the same emphasis and
// keeping spaces outside the markers (CommonMark ignores "** x**").
func renderSegs(segs []seg, emphasis bool) string {
	var b strings.Builder
	for i := 0; i < len(segs); {
		s := segs[i]
		if s.raw {
			b.WriteString(s.text)
			i++
			continue
		}
		text := s.text
		j := i + 1
		for ; j < len(segs) && !segs[j].raw && segs[j].bold == s.bold && segs[j].italic == s.italic; j++ {
			text += segs[j].text
		}
		i = j
		marker := ""
		if emphasis {
			switch {
			case s.bold && s.italic:
				marker = "***"
			case s.bold:
				marker = "**"
			case s.italic:
				marker = "*"
			}
		}
		core := strings.TrimSpace(text)
		if marker == "" || core == "" {
			b.WriteString(text)
			continue
		}
		lead := text[:len(text)-len(strings.TrimLeft(text, " \t\n"))]
		trail := text[len(strings.TrimRight(text, " \t\n")):]
		b.WriteString(lead + marker + core + marker + trail)
	}
	return b.String()
}

// inlines collects the runs of a paragraph-like element.
func (c *docxConv) inlines(n *xnode, segs *[]seg, boxes *[]*xnode) error {
	for _, k := range n.kids() {
		switch k.Local {
		case "r":
			if err := c.run(k, segs, boxes); err != nil {
				return err
			}
		case "hyperlink":
			var inner []seg
			if err := c.inlines(k, &inner, boxes); err != nil {
				return err
			}
			target := ""
			if rl, ok := c.rels[k.relAttr("id")]; ok && rl.External {
				target = rl.Target
			} else if a := k.attr("anchor"); a != "" {
				target = "#" + a
			}
			label := strings.TrimSpace(renderSegs(inner, true))
			if target == "" || label == "" {
				*segs = append(*segs, inner...)
				continue
			}
			*segs = append(*segs, seg{text: "[" + label + "](" + linkTarget(target) + ")", raw: true})
		case "ins", "smartTag", "customXml", "fldSimple", "moveTo", "dir", "bdo":
			if err := c.inlines(k, segs, boxes); err != nil {
				return err
			}
		case "sdt":
			if err := c.inlines(k.path("sdtContent"), segs, boxes); err != nil {
				return err
			}
		case "AlternateContent":
			if alt := alternate(k); alt != nil {
				if err := c.inlines(alt, segs, boxes); err != nil {
					return err
				}
			}
		case "oMath", "oMathPara":
			var t strings.Builder
			for _, x := range k.find("t") {
				t.WriteString(x.Text)
			}
			*segs = append(*segs, seg{text: t.String()})
		}
	}
	return nil
}

// linkTarget keeps a URL usable inside (…).
func linkTarget(u string) string {
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29").Replace(u)
}

func (c *docxConv) run(r *xnode, segs *[]seg, boxes *[]*xnode) error {
	rPr := r.child("rPr")
	if onOff(rPr.child("vanish")) {
		return nil // hidden text
	}
	bold, italic := onOff(rPr.child("b")), onOff(rPr.child("i"))
	text := func(s string) { *segs = append(*segs, seg{text: s, bold: bold, italic: italic}) }
	for _, k := range r.Kids {
		switch k.Local {
		case "t":
			text(k.Text)
		case "tab", "ptab":
			text(" ")
		case "br", "cr":
			if t := k.attr("type"); t == "page" || t == "column" {
				text(" ")
			} else {
				text("\n")
			}
		case "noBreakHyphen":
			text("-")
		case "drawing", "pict":
			if err := c.drawing(k, segs, boxes); err != nil {
				return err
			}
		case "AlternateContent":
			if alt := alternate(k); alt != nil {
				pseudo := &xnode{Kids: alt.Kids}
				if rPr != nil {
					pseudo.Kids = append([]*xnode{rPr}, alt.Kids...)
				}
				if err := c.run(pseudo, segs, boxes); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// drawing extracts the pictures of a w:drawing or VML w:pict and queues
// its text boxes.
func (c *docxConv) drawing(d *xnode, segs *[]seg, boxes *[]*xnode) error {
	alt := ""
	if dp := findSkip(d, "docPr", "txbxContent"); len(dp) > 0 {
		alt = dp[0].attr("descr")
		if alt == "" {
			alt = dp[0].attr("title")
		}
	}
	var ids []string
	for _, b := range findSkip(d, "blip", "txbxContent") {
		ids = append(ids, b.relAttr("embed"))
	}
	for _, b := range findSkip(d, "imagedata", "txbxContent") {
		ids = append(ids, b.relAttr("id"))
	}
	for _, id := range ids {
		rl, ok := c.rels[id]
		if !ok || rl.External {
			continue
		}
		md, err := c.o.image(c.imgs, rl.Target, alt)
		if err != nil {
			return err
		}
		if md != "" {
			*segs = append(*segs, seg{text: md, raw: true})
		}
	}
	*boxes = append(*boxes, d.find("txbxContent")...)
	return nil
}

// findSkip is find that does not descend into skip elements.
func findSkip(n *xnode, local, skip string) []*xnode {
	var out []*xnode
	var walk func(*xnode)
	walk = func(x *xnode) {
		for _, k := range x.Kids {
			switch k.Local {
			case local:
				out = append(out, k)
			case skip:
			default:
				walk(k)
			}
		}
	}
	walk(n)
	return out
}

// table builds the cell grid of a w:tbl.
func (c *docxConv) table(ctx context.Context, tbl *xnode) ([][]string, error) {
	var grid [][]string
	for _, tr := range flatten(tbl, "tr") {
		var row []string
		if n, err := strconv.Atoi(tr.path("trPr", "gridBefore").attr("val")); err == nil && n > 0 {
			row = make([]string, min(n, 64))
		}
		for _, tc := range flatten(tr, "tc") {
			tcPr := tc.child("tcPr")
			span, err := strconv.Atoi(tcPr.path("gridSpan").attr("val"))
			if err != nil || span < 1 {
				span = 1
			}
			span = min(span, 64)
			var text string
			if vm := tcPr.child("vMerge"); vm != nil && vm.attr("val") != "restart" && len(grid) > 0 && len(row) < len(grid[len(grid)-1]) {
				text = grid[len(grid)-1][len(row)]
			} else {
				bs, err := c.blocks(ctx, tc.Kids, true)
				if err != nil {
					return nil, err
				}
				parts := make([]string, 0, len(bs))
				for _, b := range bs {
					parts = append(parts, b.text)
				}
				text = strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
			}
			for range span {
				row = append(row, text)
			}
		}
		if strings.TrimSpace(strings.Join(row, "")) != "" {
			grid = append(grid, row)
		}
	}
	return grid, nil
}

// flatten returns the children named local, looking through the content
// controls and custom XML wrappers Word puts around rows and cells.
func flatten(n *xnode, local string) []*xnode {
	var out []*xnode
	for _, k := range n.kids() {
		switch k.Local {
		case local:
			out = append(out, k)
		case "sdt":
			out = append(out, flatten(k.path("sdtContent"), local)...)
		case "customXml":
			out = append(out, flatten(k, local)...)
		}
	}
	return out
}
