package chunk_test

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

func TestCountTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"blank", " \n\t ", 0},
		{"english words", "Hello, world! This is Yuxi.", 5},
		{"underscores and digits join words", "snake_case CamelCase2 x_1", 3},
		{"a decimal is two tokens", "version 3.14", 3},
		{"chinese characters count one each", "你好，世界。", 4},
		{"mixed chinese and english", "我用Go写了100行代码", 9},
		{"japanese kana and kanji", "ひらがなカタカナ漢字", 10},
		{"korean hangul", "한국어 문장", 5},
		{"punctuation only counts nothing", "，。！？——……!?", 0},
		{"non-ascii letters split words", "naïve café", 3},
		{"emoji count nothing", "🙂🙂 ok", 1},
		{"markdown syntax", "## 第一章 Intro\n- item_1", 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := chunk.CountTokens(tc.in); got != tc.want {
				t.Fatalf("CountTokens(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}
