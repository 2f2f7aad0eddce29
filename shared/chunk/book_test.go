package chunk_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

const chineseBook = `测试之书
目录
第一章 总则 ........ 1
第二章 方法 ........ 5
第一章 总则
第一节 适用范围
本书适用于知识库分块的测试场景。
本书也适用于其他需要层级结构的文档。
第二节 基本原则
编写测试应当遵循最小改动原则。
第二章 方法
第一节 准备工作
准备工作包括收集样例与确定指标。
`

func TestBookChineseChaptersAndContents(t *testing.T) {
	t.Parallel()
	cs := split(t, "book", chineseBook, cfgN(128), chunk.Options{Filename: "book.txt"})
	want := []struct {
		content  string
		headings []string
	}{
		{"测试之书", nil},
		{"第一章 总则\n第一节 适用范围\n本书适用于知识库分块的测试场景。\n本书也适用于其他需要层级结构的文档。",
			[]string{"第一章 总则", "第一节 适用范围"}},
		{"第一章 总则\n第二节 基本原则\n编写测试应当遵循最小改动原则。", []string{"第一章 总则", "第二节 基本原则"}},
		{"第二章 方法\n第一节 准备工作\n准备工作包括收集样例与确定指标。", []string{"第二章 方法", "第一节 准备工作"}},
	}
	if len(cs) != len(want) {
		t.Fatalf("got %d chunks %q", len(cs), contents(cs))
	}
	for i, w := range want {
		if cs[i].Content != w.content || !equalStrings(cs[i].Headings, w.headings) {
			t.Errorf("chunk %d = %q %q\nwant %q %q", i, cs[i].Content, cs[i].Headings, w.content, w.headings)
		}
		if strings.Contains(cs[i].Content, "........") {
			t.Errorf("table of contents left in chunk %d", i)
		}
	}
	// The span is the chunk's own text, not the repeated heading path.
	if got := source(chineseBook, cs[2]); got != "编写测试应当遵循最小改动原则。" {
		t.Errorf("chunk 2 located at %q", got)
	}
}

const markdownBook = `# Field Guide

## Contents

- [Chapter 1 Basics](#basics)
- [Chapter 2 Practice](#practice)

## Chapter 1 Basics

Every expedition starts with a plan and a map.

Pack water, a jacket and a headlamp.

### 1.1 Navigation

Use the sun and landmarks to keep your bearing.

` + "```bash\n# check the compass first\ncompass --calibrate\n```" + `

## Chapter 2 Practice

Walk short routes first and extend them week by week.
`

func TestBookMarkdownHeadings(t *testing.T) {
	t.Parallel()
	cs := split(t, "book", markdownBook, cfgN(64), chunk.Options{Filename: "guide.md"})
	want := []struct {
		content  string
		headings []string
	}{
		{"# Field Guide\n## Chapter 1 Basics\nEvery expedition starts with a plan and a map.\nPack water, a jacket and a headlamp.",
			[]string{"Field Guide", "Chapter 1 Basics"}},
		{"# Field Guide\n## Chapter 1 Basics\n### 1.1 Navigation\nUse the sun and landmarks to keep your bearing.\n" +
			"```bash\n# check the compass first\ncompass --calibrate\n```", // a comment in code is no heading
			[]string{"Field Guide", "Chapter 1 Basics", "1.1 Navigation"}},
		{"# Field Guide\n## Chapter 2 Practice\nWalk short routes first and extend them week by week.",
			[]string{"Field Guide", "Chapter 2 Practice"}},
	}
	if len(cs) != len(want) {
		t.Fatalf("got %d chunks:\n%s", len(cs), strings.Join(contents(cs), "\n---\n"))
	}
	for i, w := range want {
		if cs[i].Content != w.content || !equalStrings(cs[i].Headings, w.headings) {
			t.Errorf("chunk %d = %q %q\nwant %q %q", i, cs[i].Content, cs[i].Headings, w.content, w.headings)
		}
	}
}

// Same-path paragraphs are joined only while they fit; a long paragraph is
// split by sentences, every piece keeping the heading path.
func TestBookTokenLimit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Manual\n\n## Chapter 1 Setup\n\n")
	for i := range 12 {
		b.WriteString("Step " + itoa(i) + " explains " + words("part", i*10, 10) + ".\n\n")
	}
	long := strings.Repeat("This sentence is part of a very long paragraph about setup. ", 30)
	b.WriteString(long + "\n")
	md := b.String()
	cs := split(t, "book", md, cfgN(48), chunk.Options{})
	maxTokens(t, cs, 48)
	if len(cs) < 8 {
		t.Fatalf("only %d chunks", len(cs))
	}
	for _, c := range cs {
		if !equalStrings(c.Headings, []string{"Manual", "Chapter 1 Setup"}) {
			t.Errorf("chunk %d headings %q", c.Index, c.Headings)
		}
	}
	if !strings.HasPrefix(cs[0].Content, "# Manual\n## Chapter 1 Setup\nStep 0 explains") ||
		!strings.Contains(cs[0].Content, "\nStep 1 explains") {
		t.Errorf("first chunk does not join same-path paragraphs under one path: %q", cs[0].Content)
	}
	for _, c := range cs {
		if strings.Contains(c.Content, "very long paragraph") && !strings.HasSuffix(c.Content, "setup.") {
			t.Errorf("long paragraph piece %d not cut at a sentence end: %q", c.Index, c.Content)
		}
	}
}

func TestBookWithoutHeadingsMergesNaively(t *testing.T) {
	t.Parallel()
	var ls []string
	for i := range 20 {
		ls = append(ls, "Plain prose sentence number "+itoa(i)+" with no heading at all, said the narrator quietly.")
	}
	md := strings.Join(ls, "\n")
	cs := split(t, "book", md, cfgN(40), chunk.Options{})
	maxTokens(t, cs, 40)
	if strings.Join(contents(cs), "\n") != md {
		t.Fatalf("naive merge did not tile the text: %q", contents(cs))
	}
	if len(cs) < 5 {
		t.Fatalf("%d chunks", len(cs))
	}
}
