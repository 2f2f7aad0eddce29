package docparse_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func TestJSONIsPrettyPrintedInAFence(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	src := `{"zeta":1,"alpha":{"name":"\u77e5\u8bc6\u5e93","tags":["a","<b>&"],"empty":{},"none":[]},"big":12345678901234567890,"f":1.50,"ok":true,"nil":null}`
	res := mustParse(t, p, "data.json", []byte(src))
	want := "```json\n" + `{
  "zeta": 1,
  "alpha": {
    "name": "知识库",
    "tags": [
      "a",
      "<b>&"
    ],
    "empty": {},
    "none": []
  },
  "big": 12345678901234567890,
  "f": 1.50,
  "ok": true,
  "nil": null
}` + "\n```"
	wantEqual(t, res.Markdown, want)
	if res.Format != "json" {
		t.Errorf("Format = %q", res.Format)
	}

	top := mustParse(t, p, "list.json", []byte("\xEF\xBB\xBF [1, \"two\"] \n"))
	wantEqual(t, top.Markdown, "```json\n[\n  1,\n  \"two\"\n]\n```")
}

func TestInvalidJSONIsCorrupt(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	for name, src := range map[string]string{
		"truncated.json": `{"a": [1, 2`,
		"trailing.json":  `{"a": 1} {"b": 2}`,
		"comma.json":     `{"a": 1,}`,
		"words.json":     `hello world`,
		"deep.json":      strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
	} {
		_, err := parse(t, p, name, []byte(src))
		wantCode(t, err, docparse.ErrCorrupt, name, "not valid JSON")
	}
}
