package docparse

import (
	"archive/zip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// ooxml is an Office Open XML container (.docx, .pptx, .xlsx) opened with a
// decompression budget: every byte read from it counts against
// Options.MaxArchiveBytes, whatever the entry headers claim.
type ooxml struct {
	name   string // the document's file name, for messages
	files  map[string]*zip.File
	budget int64
	limit  int64
}

// Main-document relationship targets that identify the Office formats.
var ooxmlMainParts = map[string]string{
	"word/document.xml":     extDOCX,
	"ppt/presentation.xml":  extPPTX,
	"xl/workbook.xml":       extXLSX,
	"word/document2.xml":    extDOCX,
	"xl/workbook2.xml":      extXLSX,
	"ppt/presentation2.xml": extPPTX,
}

var formatTitle = map[string]string{
	extDOCX: "a Word document (.docx)",
	extPPTX: "a PowerPoint presentation (.pptx)",
	extXLSX: "an Excel workbook (.xlsx)",
}

// openOOXML opens the container and returns it with the path of its main
// part (word/document.xml, ppt/presentation.xml, xl/workbook.xml).
func (p *Parser) openOOXML(name, ext string, r io.ReaderAt, size int64) (*ooxml, string, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, "", coded(ErrCorrupt, "%s is not a readable %s container: %v", name, ext, err)
	}
	o := &ooxml{name: name, files: make(map[string]*zip.File, len(zr.File)), budget: p.opts.MaxArchiveBytes, limit: p.opts.MaxArchiveBytes}
	for _, f := range zr.File {
		// Part names are case-insensitive (OPC §9.1.1.1).
		o.files[strings.ToLower(strings.TrimPrefix(f.Name, "/"))] = f
	}
	main := ""
	if rels, err := o.rels(""); err == nil {
		for _, rel := range rels {
			if strings.HasSuffix(rel.Type, "/officeDocument") && !rel.External {
				main = rel.Target
				break
			}
		}
	} else if isCoded(err) && !errors.Is(err, ErrCorrupt) {
		return nil, "", err
	}
	if main == "" || !o.has(main) {
		for part := range ooxmlMainParts {
			if o.has(part) {
				main = part
				break
			}
		}
	}
	got, known := ooxmlMainParts[strings.ToLower(main)]
	if !known && main != "" && o.has(main) {
		got = ext // a renamed main part: trust the extension
		known = true
	}
	switch {
	case !known:
		return nil, "", coded(ErrWrongType, "%s has the extension %s but is a plain ZIP archive, not %s", name, ext, formatTitle[ext])
	case got != ext:
		return nil, "", coded(ErrWrongType, "%s has the extension %s but is %s; rename it to %s", name, ext, formatTitle[got], got)
	}
	return o, main, nil
}

func isCoded(err error) bool {
	_, ok := failure.As(err)
	return ok
}

// errPartMissing marks a missing part (callers decide whether it matters).
var errPartMissing = errors.New("part not found")

func (o *ooxml) file(part string) *zip.File {
	return o.files[strings.ToLower(strings.TrimPrefix(part, "/"))]
}

func (o *ooxml) has(part string) bool { return o.file(part) != nil }

// open returns a reader of the part that fails once the budget is spent.
func (o *ooxml) open(part string) (io.ReadCloser, error) {
	f := o.file(part)
	if f == nil {
		return nil, fmt.Errorf("%w: missing part %s", errPartMissing, part)
	}
	if f.Flags&0x1 != 0 {
		return nil, coded(ErrEncrypted, "%s: part %s is encrypted", o.name, part)
	}
	if f.UncompressedSize64 > uint64(max(o.budget, 0)) {
		return nil, o.overBudget()
	}
	rc, err := f.Open()
	if err != nil {
		return nil, coded(ErrCorrupt, "%s: cannot open part %s: %v", o.name, part, err)
	}
	return &budgetReader{rc: rc, o: o, part: part}, nil
}

func (o *ooxml) overBudget() error {
	return coded(ErrArchiveRejected, "%s decompresses to more than %s (limit on total uncompressed size)", o.name, humanBytes(o.limit))
}

type budgetReader struct {
	rc   io.ReadCloser
	o    *ooxml
	part string
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.o.budget <= 0 {
		// Allow one byte past the budget to tell "exactly at" from "over".
		p = p[:min(len(p), 1)]
	} else {
		p = p[:min(int64(len(p)), b.o.budget+1)]
	}
	n, err := b.rc.Read(p)
	b.o.budget -= int64(n)
	if b.o.budget < 0 {
		return n, b.o.overBudget()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = coded(ErrCorrupt, "%s: part %s is damaged: %v", b.o.name, b.part, err)
	}
	return n, err
}

func (b *budgetReader) Close() error { return b.rc.Close() }

// read returns a whole part.
func (o *ooxml) read(part string) ([]byte, error) {
	rc, err := o.open(part)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// dom parses a part into a tree.
func (o *ooxml) dom(part string) (*xnode, error) {
	rc, err := o.open(part)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	n, err := parseXML(rc)
	if err != nil {
		if isCoded(err) {
			return nil, err
		}
		return nil, coded(ErrCorrupt, "%s: part %s is not valid XML: %v", o.name, part, err)
	}
	return n, nil
}

// rel is one relationship of a part.
type rel struct {
	Type     string
	Target   string // resolved part name for internal targets, the URL for external ones
	External bool
}

// rels reads the relationships of part ("" for the package).
func (o *ooxml) rels(part string) (map[string]rel, error) {
	dir, file := path.Split(part)
	relsPart := dir + "_rels/" + file + ".rels"
	if !o.has(relsPart) {
		return map[string]rel{}, nil
	}
	root, err := o.dom(relsPart)
	if err != nil {
		return nil, err
	}
	out := map[string]rel{}
	for _, r := range root.all("Relationship") {
		target := r.attr("Target")
		ext := strings.EqualFold(r.attr("TargetMode"), "External")
		if !ext {
			target = resolvePart(dir, target)
		}
		out[r.attr("Id")] = rel{Type: r.attr("Type"), Target: target, External: ext}
	}
	return out, nil
}

// resolvePart resolves a relationship target against the source part's
// directory. Absolute targets start at the package root.
func resolvePart(dir, target string) string {
	if u, err := url.PathUnescape(target); err == nil {
		target = u
	}
	if strings.HasPrefix(target, "/") {
		return strings.TrimPrefix(path.Clean(target), "/")
	}
	return strings.TrimPrefix(path.Clean("/"+dir+target), "/")
}

// image reads an image part for the image set, named relative to the
// document's top folder ("word/media/image1.png" → "media/image1.png").
// It returns the Markdown for it: a link, or a placeholder when dropped.
func (o *ooxml) image(imgs *imageSet, part, alt string) (string, error) {
	name := part
	if i := strings.Index(part, "/"); i >= 0 {
		name = part[i+1:]
	}
	f := o.file(part)
	if f == nil {
		return "", nil // a dangling reference: nothing to show
	}
	if !imgs.admit(name, int64(f.UncompressedSize64)) {
		return "[image: " + name + "]", nil
	}
	data, err := o.read(part)
	if err != nil {
		return "", err
	}
	if !imgs.add(name, "", data) {
		return "[image: " + name + "]", nil
	}
	return "![" + markdownAlt(alt) + "](" + name + ")", nil
}

func markdownAlt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer("[", `\[`, "]", `\]`).Replace(s)
}

// xnode is a minimal XML element tree: Office parts are read whole (bounded
// by the archive budget) because text boxes and tables nest paragraphs.
type xnode struct {
	Space, Local string
	Attr         []xml.Attr
	Kids         []*xnode
	Text         string // character data directly inside the element
}

// maxXMLDepth rejects pathological nesting before the recursive walkers run.
const maxXMLDepth = 256

func parseXML(r io.Reader) (*xnode, error) {
	dec := xml.NewDecoder(r)
	root := &xnode{}
	stack := []*xnode{root}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		top := stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) > maxXMLDepth {
				return nil, fmt.Errorf("elements nested deeper than %d levels", maxXMLDepth)
			}
			n := &xnode{Space: t.Name.Space, Local: t.Name.Local, Attr: t.Attr}
			top.Kids = append(top.Kids, n)
			stack = append(stack, n)
		case xml.EndElement:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if len(stack) > 1 {
				top.Text += string(t)
			}
		}
	}
	if len(root.Kids) == 0 {
		return nil, errors.New("no root element")
	}
	return root.Kids[0], nil
}

// kids returns the children of a possibly missing element.
func (n *xnode) kids() []*xnode {
	if n == nil {
		return nil
	}
	return n.Kids
}

// text returns the character data of a possibly missing element.
func (n *xnode) text() string {
	if n == nil {
		return ""
	}
	return n.Text
}

// attr returns the attribute with this local name (any namespace).
func (n *xnode) attr(local string) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// relAttr returns an attribute in the relationships namespace (r:id,
// r:embed), transitional or strict.
func (n *xnode) relAttr(local string) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Attr {
		if a.Name.Local == local && strings.Contains(a.Name.Space, "relationships") {
			return a.Value
		}
	}
	return ""
}

// child returns the first child element with this local name.
func (n *xnode) child(local string) *xnode {
	if n == nil {
		return nil
	}
	for _, k := range n.Kids {
		if k.Local == local {
			return k
		}
	}
	return nil
}

// path follows child elements by local name.
func (n *xnode) path(locals ...string) *xnode {
	for _, l := range locals {
		n = n.child(l)
	}
	return n
}

// all returns the direct children with this local name.
func (n *xnode) all(local string) []*xnode {
	if n == nil {
		return nil
	}
	var out []*xnode
	for _, k := range n.Kids {
		if k.Local == local {
			out = append(out, k)
		}
	}
	return out
}

// find returns descendants with this local name, in document order, not
// descending into matches.
func (n *xnode) find(local string) []*xnode {
	var out []*xnode
	var walk func(*xnode)
	walk = func(x *xnode) {
		for _, k := range x.Kids {
			if k.Local == local {
				out = append(out, k)
				continue
			}
			walk(k)
		}
	}
	if n != nil {
		walk(n)
	}
	return out
}

// onOff reads an OOXML boolean property element (<w:b/>, <w:b w:val="0"/>).
func onOff(n *xnode) bool {
	if n == nil {
		return false
	}
	switch strings.ToLower(n.attr("val")) {
	case "0", "false", "off", "none":
		return false
	}
	return true
}

// alternate picks the branch of mc:AlternateContent to read: the first
// Choice (the one the writer intended), else the Fallback.
func alternate(n *xnode) *xnode {
	if c := n.child("Choice"); c != nil {
		return c
	}
	return n.child("Fallback")
}
