package docparse_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func TestCSVOneTablePerRow(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	src := "\xEF\xBB\xBFname,city,note\r\nAnn,Paris,\"likes, commas\"\r\n\r\nBob,\"New\nYork\",a|b\r\n"
	res := mustParse(t, p, "people.csv", []byte(src))
	want := "| name | city | note |\n| --- | --- | --- |\n| Ann | Paris | likes, commas |\n\n" +
		"| name | city | note |\n| --- | --- | --- |\n| Bob | New York | a\\|b |"
	wantEqual(t, res.Markdown, want)
	if res.Format != "csv" {
		t.Errorf("Format = %q", res.Format)
	}
}

func TestCSVDelimiterDetection(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	want := "| a | b |\n| --- | --- |\n| 1,5 | 2 |"
	for name, src := range map[string]string{
		"semicolon.csv": "a;b\n1,5;2\n",
		"tab.csv":       "a\tb\n1,5\t2\n",
		"quoted.csv":    "a;b\n\"1,5\";2\n",
	} {
		wantEqual(t, mustParse(t, p, name, []byte(src)).Markdown, want)
	}
}

func TestCSVEncodings(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	// "名称,数量\n苹果,3" in GBK.
	gbk := []byte{0xC3, 0xFB, 0xB3, 0xC6, ',', 0xCA, 0xFD, 0xC1, 0xBF, '\n', 0xC6, 0xBB, 0xB9, 0xFB, ',', '3', '\n'}
	wantEqual(t, mustParse(t, p, "gbk.csv", gbk).Markdown, "| 名称 | 数量 |\n| --- | --- |\n| 苹果 | 3 |")

	le := utf16Bytes("名称\t数量\r\n苹果\t3\r\n", binary.LittleEndian, []byte{0xFF, 0xFE})
	wantEqual(t, mustParse(t, p, "utf16.csv", le).Markdown, "| 名称 | 数量 |\n| --- | --- |\n| 苹果 | 3 |")
}

func TestCSVHeaderLikePandas(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	res := mustParse(t, p, "h.csv", []byte("a,,a,a\n1,2,3,4,5\n"))
	wantEqual(t, res.Markdown, "| a | Unnamed: 1 | a.1 | a.2 | Unnamed: 4 |\n| --- | --- | --- | --- | --- |\n| 1 | 2 | 3 | 4 | 5 |")

	short := mustParse(t, p, "short.csv", []byte("a,b,c\n1\n"))
	wantEqual(t, short.Markdown, "| a | b | c |\n| --- | --- | --- |\n| 1 |  |  |")

	only := mustParse(t, p, "header.csv", []byte("a,b\n"))
	wantEqual(t, only.Markdown, "| a | b |\n| --- | --- |")
}

func TestCSVRowLimit(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{MaxTableRows: 2})
	res := mustParse(t, p, "many.csv", []byte("n\n1\n2\n3\n4\n"))
	if got := strings.Count(res.Markdown, "| n |"); got != 2 {
		t.Errorf("%d tables, want 2:\n%s", got, res.Markdown)
	}
	wantContains(t, res.Markdown, "| 2 |", "_(2 more rows not shown: the limit is 2 rows)_")
	if strings.Contains(res.Markdown, "| 3 |") {
		t.Errorf("row over the limit rendered:\n%s", res.Markdown)
	}
	if len(res.Warnings) != 1 {
		t.Errorf("warnings = %v", res.Warnings)
	}
}
