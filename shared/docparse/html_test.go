package docparse_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func TestHTMLBecomesMarkdown(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	img := pngBytes("inline")
	src := `<!DOCTYPE html><html><head><title>Ignored title</title><style>body{color:red}</style>
<script>alert("x")</script></head><body>
<h1>Guide</h1><h2>Install</h2>
<p>Run <strong>make</strong> and read <a href="https://example.com/docs">the docs</a>.</p>
<ul><li>first</li><li>second</li></ul>
<table><tr><th>Name</th><th>Score</th></tr><tr><td>Ann</td><td>90</td></tr></table>
<img alt="logo" src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(img) + `">
<noscript>enable js</noscript>
</body></html>`
	res := mustParse(t, p, "guide.htm", []byte(src))
	wantContains(t, res.Markdown,
		"# Guide", "## Install",
		"Run **make** and read [the docs](https://example.com/docs).",
		"- first\n- second",
		"| Name | Score |", "| Ann | 90 |",
		"![logo](images/inline-1.png)",
	)
	for _, gone := range []string{"alert", "color:red", "Ignored title", "enable js", "base64"} {
		if strings.Contains(res.Markdown, gone) {
			t.Errorf("Markdown keeps %q:\n%s", gone, res.Markdown)
		}
	}
	if len(res.Images) != 1 || res.Images[0].Name != "images/inline-1.png" || res.Images[0].ContentType != "image/png" || !bytes.Equal(res.Images[0].Data, img) {
		t.Fatalf("images = %+v", res.Images)
	}
	if res.Format != "html" {
		t.Errorf("Format = %q, want html", res.Format)
	}
}

func TestHTMLDeclaredCharset(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	// "知识库" in GBK, declared by a meta tag.
	src := append([]byte(`<html><head><meta charset="gbk"></head><body><p>`), 0xD6, 0xAA, 0xCA, 0xB6, 0xBF, 0xE2)
	src = append(src, "</p></body></html>"...)
	res := mustParse(t, p, "cn.html", src)
	wantEqual(t, res.Markdown, "知识库")
}
