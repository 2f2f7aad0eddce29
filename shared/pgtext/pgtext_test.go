package pgtext_test

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/pgtext"
)

func TestCheckJSON(t *testing.T) {
	for doc, ok := range map[string]bool{
		`{"a":"b"}`: true, `{"a":"\u00e9"}`: true, `{"a":"\ud83d\ude00"}`: true, `{"a":"\\u0000"}`: true, `{"a":"\\\\\u0041"}`: true,
		`{"a":"\u0000"}`: false, `{"a":"\ud800"}`: false, `{"a":"\udc00"}`: false, `{"a":"\ud83d\u0041"}`: false, "{\"a\":\"\xff\"}": false,
		`{"a":"\ud800`: false,
	} {
		if err := pgtext.CheckJSON([]byte(doc)); (err == nil) != ok {
			t.Errorf("CheckJSON(%s) = %v, want ok=%v", doc, err, ok)
		}
	}
	if pgtext.Check("a\x00") == nil || pgtext.Check("\xff") == nil || pgtext.Check("é") != nil {
		t.Error("Check")
	}
}
