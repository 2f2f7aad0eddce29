package keyword_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/keyword"
)

func TestAutoAnalyzer(t *testing.T) {
	an := keyword.NewAnalyzer("auto")
	cases := []struct {
		name, text string
		want       []string
	}{
		{"english stop words and stemming", "The cats are running into the houses!",
			[]string{"cat", "run", "hous"}},
		{"stemming merges inflections", "connected connection connections CONNECTING",
			[]string{"connect", "connect", "connect", "connect"}},
		{"possessive and contractions", "The patient's doctors don’t agree",
			[]string{"patient", "doctor", "dont", "agre"}},
		{"hyphens split, decimals and grouped digits stay", "IL-6 rose 1.5-fold in 10,000 mice.",
			[]string{"il", "6", "rose", "1.5", "fold", "10,000", "mice"}},
		{"chinese unigrams and bigrams", "战国无双",
			[]string{"战", "战国", "国", "国无", "无", "无双", "双"}},
		{"chinese punctuation separates runs", "光荣，开发。",
			[]string{"光", "光荣", "荣", "开", "开发", "发"}},
		{"single character run", "是",
			[]string{"是"}},
		{"mixed latin and chinese", "iPhone手机支持5G网络",
			[]string{"iphon", "手", "手机", "机", "机支", "支", "支持", "持", "5g", "网", "网络", "络"}},
		{"japanese scripts form one run", "東京タワー",
			[]string{"東", "東京", "京", "京タ", "タ", "タワ", "ワ", "ワー", "ー"}},
		{"hangul", "한국어", []string{"한", "한국", "국", "국어", "어"}},
		{"full-width forms fold to ascii", "Ｈｅｌｌｏ　ＷＯＲＬＤ１２３",
			[]string{"hello", "world123"}},
		{"diacritics fold, precomposed or not", "Café cafe\u0301 naïve Straße",
			[]string{"cafe", "cafe", "naiv", "strass"}},
		{"ligatures, sub- and superscripts", "ﬁbrosis CO₂ m²",
			[]string{"fibrosi", "co2", "m2"}},
		{"other scripts are lower-cased, not stemmed", "Москва ΑΛΦΑ",
			[]string{"москва", "αλφα"}},
		{"only stop words", "to be or not to be", []string{}},
		{"empty", "", []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := an.Terms(tc.text)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Terms(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

func TestAnalyzerDropsOverlongTokens(t *testing.T) {
	an := keyword.NewAnalyzer("")
	blob := strings.Repeat("x", 101)
	got := an.Terms("before " + blob + " after")
	if want := []string{"befor", "after"}; !slices.Equal(got, want) {
		t.Fatalf("Terms = %q, want %q", got, want)
	}
}

func TestSimpleAnalyzerKeepsWordsAsWritten(t *testing.T) {
	an := keyword.NewAnalyzer("simple")
	got := an.Terms("The Cats are running 北京")
	want := []string{"the", "cats", "are", "running", "北", "北京", "京"}
	if !slices.Equal(got, want) {
		t.Fatalf("Terms = %q, want %q", got, want)
	}
}
