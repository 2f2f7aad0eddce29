package docparse

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
)

// parsePPTX renders one "## Slide N" section per slide, in presentation
// order (ppt/presentation.xml; slide file numbers when that list is missing).
// Within a slide, shapes are read in their stored order: the title
// placeholder becomes "### title", body placeholders and bulleted paragraphs
// become list items, tables become Markdown tables and pictures are extracted
// (ppt/media/x.png → Image "media/x.png"). Speaker notes follow as a
// "> Notes:" quote. Slide numbers, dates and footers are left out.
// Result.Pages is the slide count.
func (p *Parser) parsePPTX(ctx context.Context, name string, r io.ReaderAt, size int64) (Result, error) {
	o, main, err := p.openOOXML(name, extPPTX, r, size)
	if err != nil {
		return Result{}, err
	}
	pres, err := o.dom(main)
	if err != nil {
		return Result{}, err
	}
	rels, err := o.rels(main)
	if err != nil {
		return Result{}, err
	}
	var slides []string
	for _, id := range pres.path("sldIdLst").all("sldId") {
		if rl, ok := rels[id.relAttr("id")]; ok && !rl.External && o.has(rl.Target) {
			slides = append(slides, rl.Target)
		}
	}
	if len(slides) == 0 {
		slides = numberedParts(o, "ppt/slides/slide")
	}
	c := &pptxConv{o: o, imgs: p.newImageSet()}
	sections := make([]string, 0, len(slides))
	for i, part := range slides {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		body, err := c.slide(part)
		if err != nil {
			return Result{}, err
		}
		sec := "## Slide " + strconv.Itoa(i+1)
		if body != "" {
			sec += "\n\n" + body
		}
		sections = append(sections, sec)
	}
	return Result{Markdown: strings.Join(sections, "\n\n"), Images: c.imgs.images, Pages: len(slides), Warnings: c.imgs.warnings}, nil
}

// numberedParts lists prefixN.xml parts in numeric order.
func numberedParts(o *ooxml, prefix string) []string {
	type part struct {
		name string
		n    int
	}
	var parts []part
	for name := range o.files {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		num, ok := strings.CutSuffix(rest, ".xml")
		if n, err := strconv.Atoi(num); ok && err == nil {
			parts = append(parts, part{name, n})
		}
	}
	slices.SortFunc(parts, func(a, b part) int { return a.n - b.n })
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.name
	}
	return out
}

type pptxConv struct {
	o    *ooxml
	imgs *imageSet
}

func (c *pptxConv) slide(part string) (string, error) {
	blocks, rels, err := c.shapeBlocks(part, false)
	if err != nil {
		return "", err
	}
	for _, rl := range rels {
		if rl.External || !strings.HasSuffix(rl.Type, "/notesSlide") || !c.o.has(rl.Target) {
			continue
		}
		notes, err := c.notes(rl.Target)
		if err != nil {
			return "", err
		}
		if notes != "" {
			blocks = append(blocks, block{text: quote("Notes: " + notes)})
		}
	}
	return joinBlocks(blocks), nil
}

// quote renders text as a Markdown blockquote.
func quote(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + l
		}
	}
	return strings.Join(lines, "\n")
}

func (c *pptxConv) notes(part string) (string, error) {
	blocks, _, err := c.shapeBlocks(part, true)
	if err != nil {
		return "", err
	}
	return joinBlocks(blocks), nil
}

// shapeBlocks reads the blocks of a slide or notes part's shape tree
// (notes: the part is a notes page) and returns them with the part's
// relationships.
func (c *pptxConv) shapeBlocks(part string, notes bool) ([]block, map[string]rel, error) {
	root, err := c.o.dom(part)
	if err != nil {
		return nil, nil, err
	}
	rels, err := c.o.rels(part)
	if err != nil {
		return nil, nil, err
	}
	var blocks []block
	if err := c.shapes(root.path("cSld", "spTree"), rels, &blocks, notes); err != nil {
		return nil, nil, err
	}
	return blocks, rels, nil
}

// shapes renders a shape tree. In notes only the body placeholder counts.
func (c *pptxConv) shapes(tree *xnode, rels map[string]rel, out *[]block, notes bool) error {
	for _, k := range tree.kids() {
		switch k.Local {
		case "sp":
			c.shape(k, rels, out, notes)
		case "grpSp":
			if err := c.shapes(k, rels, out, notes); err != nil {
				return err
			}
		case "AlternateContent":
			if err := c.shapes(alternate(k), rels, out, notes); err != nil {
				return err
			}
		case "graphicFrame":
			if notes {
				continue
			}
			if tbl := k.path("graphic", "graphicData", "tbl"); tbl != nil {
				if t := markdownTable(c.table(tbl, rels)); t != "" {
					*out = append(*out, block{text: t})
				}
			}
		case "pic":
			if notes {
				continue
			}
			cNvPr := k.path("nvPicPr", "cNvPr")
			alt := cNvPr.attr("descr")
			for _, b := range k.find("blip") {
				rl, ok := rels[b.relAttr("embed")]
				if !ok || rl.External {
					continue
				}
				md, err := c.o.image(c.imgs, rl.Target, alt)
				if err != nil {
					return err
				}
				if md != "" {
					*out = append(*out, block{text: md})
				}
			}
		}
	}
	return nil
}

func (c *pptxConv) shape(sp *xnode, rels map[string]rel, out *[]block, notes bool) {
	ph := sp.path("nvSpPr", "nvPr", "ph")
	phType := ph.attr("type")
	switch phType {
	case "dt", "ftr", "sldNum", "hdr", "sldImg":
		return
	}
	isTitle := phType == "title" || phType == "ctrTitle"
	isBody := ph != nil && (phType == "" || phType == "body" || phType == "obj")
	if notes && !isBody {
		return
	}
	var title []string
	counters := map[int]int{}
	for _, ap := range sp.path("txBody").all("p") {
		text := strings.TrimSpace(renderSegs(c.runs(ap, rels), !isTitle))
		if text == "" {
			continue
		}
		if isTitle {
			title = append(title, strings.Join(strings.Fields(text), " "))
			continue
		}
		pPr := ap.child("pPr")
		lvl, _ := strconv.Atoi(pPr.attr("lvl"))
		lvl = min(max(lvl, 0), 8)
		marker := ""
		switch {
		case pPr.child("buNone") != nil:
		case pPr.child("buAutoNum") != nil:
			counters[lvl]++
			marker = strconv.Itoa(counters[lvl]) + ". "
		case pPr.child("buChar") != nil || (isBody && !notes):
			marker = "- "
		}
		if marker == "" {
			*out = append(*out, block{text: text})
			continue
		}
		*out = append(*out, block{text: strings.Repeat("    ", lvl) + marker + text, list: true})
	}
	if len(title) > 0 {
		*out = append(*out, block{text: "### " + strings.Join(title, " ")})
	}
}

// runs collects the text runs of a DrawingML paragraph.
func (c *pptxConv) runs(ap *xnode, rels map[string]rel) []seg {
	var segs []seg
	for _, k := range ap.Kids {
		switch k.Local {
		case "r", "fld":
			rPr := k.child("rPr")
			text := k.path("t").text()
			if link := rPr.child("hlinkClick"); link != nil {
				if rl, ok := rels[link.relAttr("id")]; ok && rl.External && strings.TrimSpace(text) != "" {
					segs = append(segs, seg{text: "[" + strings.TrimSpace(text) + "](" + linkTarget(rl.Target) + ")", raw: true})
					continue
				}
			}
			segs = append(segs, seg{text: text, bold: attrOn(rPr.attr("b")), italic: attrOn(rPr.attr("i"))})
		case "br":
			segs = append(segs, seg{text: "\n"})
		}
	}
	return segs
}

func attrOn(v string) bool { return v == "1" || v == "true" }

// table builds the cell grid of an a:tbl; merged cells repeat the text of
// the cell they continue.
func (c *pptxConv) table(tbl *xnode, rels map[string]rel) [][]string {
	var grid [][]string
	for _, tr := range tbl.all("tr") {
		var row []string
		for _, tc := range tr.all("tc") {
			col := len(row)
			var text string
			switch {
			case attrOn(tc.attr("hMerge")) && col > 0:
				text = row[col-1]
			case attrOn(tc.attr("vMerge")) && len(grid) > 0 && col < len(grid[len(grid)-1]):
				text = grid[len(grid)-1][col]
			default:
				var parts []string
				for _, ap := range tc.path("txBody").all("p") {
					if t := strings.TrimSpace(renderSegs(c.runs(ap, rels), true)); t != "" {
						parts = append(parts, t)
					}
				}
				text = strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
			}
			row = append(row, text)
		}
		if strings.TrimSpace(strings.Join(row, "")) != "" {
			grid = append(grid, row)
		}
	}
	return grid
}
