package chunk_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

const chineseLaw = `中华人民共和国测试法
目录
第一章 总则
第二章 担保
第一章 总则
第一条 为了规范测试活动，保障各方权益，制定本法。
第二条 本法适用于在中华人民共和国境内进行的测试活动。
第二章 担保
第一节 一般规定
第三条 有下列情形之一的，可以设定担保：
（一）借贷、买卖、货物运输、加工承揽等经济活动；
（二）当事人约定的其他情形。
第四条 担保活动应当遵循平等、自愿、公平、诚实信用的原则。
`

func TestLawsChapterSectionArticle(t *testing.T) {
	t.Parallel()
	cs := split(t, "laws", chineseLaw, cfgN(256), chunk.Options{Filename: "测试法.pdf"})
	want := []struct {
		content  string
		headings []string
	}{
		{"中华人民共和国测试法", nil},
		{"第一章 总则\n第一条\n为了规范测试活动，保障各方权益，制定本法。", []string{"第一章 总则", "第一条"}},
		{"第一章 总则\n第二条\n本法适用于在中华人民共和国境内进行的测试活动。", []string{"第一章 总则", "第二条"}},
		{"第二章 担保\n第一节 一般规定\n第三条\n有下列情形之一的，可以设定担保：\n（一）借贷、买卖、货物运输、加工承揽等经济活动；\n（二）当事人约定的其他情形。",
			[]string{"第二章 担保", "第一节 一般规定", "第三条"}},
		{"第二章 担保\n第一节 一般规定\n第四条\n担保活动应当遵循平等、自愿、公平、诚实信用的原则。",
			[]string{"第二章 担保", "第一节 一般规定", "第四条"}},
	}
	if len(cs) != len(want) {
		t.Fatalf("got %d chunks:\n%s", len(cs), strings.Join(contents(cs), "\n---\n"))
	}
	for i, w := range want {
		if cs[i].Content != w.content || !equalStrings(cs[i].Headings, w.headings) {
			t.Errorf("chunk %d = %q %q\nwant %q %q", i, cs[i].Content, cs[i].Headings, w.content, w.headings)
		}
	}
	// Located at the article itself, not at the chapter title or the contents.
	if got := source(chineseLaw, cs[2]); got != "第二条 本法适用于在中华人民共和国境内进行的测试活动。" {
		t.Errorf("chunk 2 located at %q", got)
	}
}

// Markdown decoration (#, list markers, **) does not hide the articles, and
// articles do not collapse into one chapter chunk (original test).
func TestLawsMarkdownArticles(t *testing.T) {
	t.Parallel()
	md := "## 第一章 总则\n" +
		"- **第一条** 为了规范担保活动，保障债权实现，制定本法。\n" +
		"- **第二条** 在借贷活动中，当事人可以依法设定担保。\n" +
		"- **第三条** 担保活动应当遵循平等、自愿、公平和诚实信用原则。"
	cs := split(t, "laws", md, cfgN(120), chunk.Options{Filename: "laws.md"})
	want := []string{
		"第一章 总则\n第一条\n为了规范担保活动，保障债权实现，制定本法。",
		"第一章 总则\n第二条\n在借贷活动中，当事人可以依法设定担保。",
		"第一章 总则\n第三条\n担保活动应当遵循平等、自愿、公平和诚实信用原则。",
	}
	if got := contents(cs); !equalStrings(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// Items (一)(二) stay with their article when articles are the leaves
// (original test: article level before item level).
func TestLawsItemsStayWithArticle(t *testing.T) {
	t.Parallel()
	md := "第六章 特别纳税调整\n" +
		"第一百零六条 企业所得税法第三十八条规定的可以指定扣缴义务人的情形，包括：\n" +
		"(一)在资金、经营、购销等方面存在直接或者间接的控制关系;\n" +
		"(二)可以代表企业实施其他具有约束力的行为。\n" +
		"第一百零七条 税务机关可以依法核定应纳税所得额。"
	cs := split(t, "laws", md, cfgN(1000), chunk.Options{Filename: "laws.docx"})
	found := false
	for _, c := range cs {
		if strings.Contains(c.Content, "第一百零六条") {
			found = true
			if !strings.Contains(c.Content, "(一)") || !strings.Contains(c.Content, "(二)") {
				t.Errorf("items split from their article: %q", c.Content)
			}
			if strings.Contains(c.Content, "第一百零七条") {
				t.Errorf("two articles in one chunk: %q", c.Content)
			}
		}
	}
	if !found {
		t.Fatalf("article missing: %q", contents(cs))
	}
}

func TestLawsTokenLimit(t *testing.T) {
	t.Parallel()
	t.Run("many long articles in a docx", func(t *testing.T) {
		t.Parallel()
		ls := []string{"#### 中华人民共和国企业所得税法实施条例", "##### 微信扫一扫：分享"}
		for i := 1; i < 260; i++ {
			ls = append(ls, "第"+itoa(i)+"条 企业所得税法实施细则说明，适用于测试场景，确保条文长度足够用于验证分块策略。")
		}
		cs := split(t, "laws", strings.Join(ls, "\n"), chunk.Config{ChunkTokenNum: 180, Delimiter: "\n", OverlappedPercent: 20},
			chunk.Options{Filename: "laws.docx"})
		if len(cs) < 2 {
			t.Fatalf("%d chunks", len(cs))
		}
		maxTokens(t, cs, 180)
	})
	t.Run("one very long line is cut at sentence ends", func(t *testing.T) {
		t.Parallel()
		md := strings.Repeat("第一条 企业所得税法实施细则用于测试分块语义边界。", 120)
		cs := split(t, "laws", md, cfgN(120), chunk.Options{Filename: "laws.txt"})
		if len(cs) < 2 {
			t.Fatalf("%d chunks", len(cs))
		}
		maxTokens(t, cs, 120)
		for _, c := range cs {
			if !strings.HasSuffix(c.Content, "。") && !strings.HasSuffix(c.Content, "第一条") {
				t.Errorf("chunk %d does not end at a sentence: …%q", c.Index, c.Content[max(0, len(c.Content)-30):])
			}
		}
	})
	t.Run("hard split as last resort", func(t *testing.T) {
		t.Parallel()
		md := "第一章 总则\n第一条 " + strings.Repeat("无标点的超长条文内容", 60)
		cs := split(t, "laws", md, cfgN(64), chunk.Options{})
		maxTokens(t, cs, 64)
		for _, c := range cs {
			if !equalStrings(c.Headings, []string{"第一章 总则", "第一条"}) {
				t.Errorf("piece %d lost its headings: %q", c.Index, c.Headings)
			}
		}
	})
}

func TestLawsDocxHeadingTree(t *testing.T) {
	t.Parallel()
	md := "# 员工手册\n## 第一部分 考勤\n每天九点前打卡。\n迟到需要说明原因。\n## 第二部分 报销\n报销需要发票。"
	cs := split(t, "laws", md, cfgN(128), chunk.Options{Filename: "手册.DOCX"})
	want := []string{
		"员工手册\n第一部分 考勤\n每天九点前打卡。\n迟到需要说明原因。",
		"员工手册\n第二部分 报销\n报销需要发票。",
	}
	if got := contents(cs); !equalStrings(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if !equalStrings(cs[1].Headings, []string{"员工手册", "第二部分 报销"}) {
		t.Errorf("headings %q", cs[1].Headings)
	}
}

func TestLawsWithoutArticlesMergesNaively(t *testing.T) {
	t.Parallel()
	md := strings.Repeat("这是一段没有任何条款编号的普通说明文字，用于检验回退逻辑。\n", 20)
	cs := split(t, "laws", md, cfgN(64), chunk.Options{})
	maxTokens(t, cs, 64)
	if len(cs) < 4 || len(cs) > 10 {
		t.Fatalf("%d chunks; want lines merged, not one chunk per line", len(cs))
	}
}
