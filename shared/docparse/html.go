package docparse

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html/charset"
)

// parseHTML converts .html/.htm to Markdown with ATX headings (the original
// used markdownify). <head>, <script>, <style> and form controls are dropped
// by the base plugin; tables become Markdown tables. Inline data: images are
// extracted as images/inline-N.<ext> so the Markdown does not carry base64.
func (p *Parser) parseHTML(ctx context.Context, name string, r io.ReaderAt, size int64) (Result, error) {
	b, err := readAll(r, size)
	if err != nil {
		return Result{}, err
	}
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(commonmark.WithHeadingStyle(commonmark.HeadingStyleATX)),
		table.NewTablePlugin(
			table.WithHeaderPromotion(true),
			table.WithSkipEmptyRows(true),
			table.WithSpanCellBehavior(table.SpanBehaviorMirror),
			table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal),
		),
	))
	md, err := conv.ConvertString(htmlText(b), converter.WithContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, coded(ErrCorrupt, "%s could not be converted from HTML: %v", name, err)
	}
	imgs := p.newImageSet()
	md = extractDataImages(md, imgs)
	return Result{Markdown: md, Images: imgs.images, Warnings: imgs.warnings}, nil
}

// htmlText decodes HTML bytes: a BOM or UTF-8 wins, then the <meta charset>,
// then the text heuristics of decodeText.
func htmlText(b []byte) string {
	if enc, name, certain := charset.DetermineEncoding(b, "text/html"); certain && name != "utf-8" {
		if s, err := enc.NewDecoder().Bytes(b); err == nil {
			return string(s)
		}
	}
	return normalizeNewlines(decodeText(b))
}

var dataImageLink = regexp.MustCompile(`!\[([^\]]*)\]\(<?data:image/([a-zA-Z0-9.+-]+);base64,([A-Za-z0-9+/=%\s]+)>?\)`)

// extractDataImages moves base64 data: images out of Markdown links.
func extractDataImages(md string, imgs *imageSet) string {
	n := 0
	return dataImageLink.ReplaceAllStringFunc(md, func(m string) string {
		sub := dataImageLink.FindStringSubmatch(m)
		alt, subtype, payload := sub[1], strings.ToLower(sub[2]), sub[3]
		payload = strings.Join(strings.Fields(strings.ReplaceAll(payload, "%20", "")), "")
		data, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			data, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(payload, "="))
		}
		if err != nil {
			return "[" + alt + "]"
		}
		n++
		ext := subtype
		switch subtype {
		case "jpeg":
			ext = "jpg"
		case "svg+xml":
			ext = "svg"
		}
		name := fmt.Sprintf("images/inline-%d.%s", n, ext)
		if !imgs.add(name, "image/"+subtype, data) {
			return "[" + alt + "]"
		}
		return "![" + alt + "](" + name + ")"
	})
}
