package chunk_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

func TestQAExtraction(t *testing.T) {
	t.Parallel()
	english := chunk.DefaultConfig()
	english.Language = "English"
	cases := []struct {
		name     string
		filename string
		md       string
		cfg      chunk.Config
		want     []string
	}{
		{
			name:     "markdown table under a heading, header row skipped",
			filename: "faq.md",
			md: "# 常见问题\n\n| 问题 | 答案 |\n| --- | --- |\n| 如何重置密码？ | 在登录页点击“忘记密码”。 |\n" +
				"| 支持哪些文件格式？ | PDF、Word、Markdown 和 Excel。 |\n",
			want: []string{"问题：如何重置密码？\t回答：在登录页点击“忘记密码”。",
				"问题：支持哪些文件格式？\t回答：PDF、Word、Markdown 和 Excel。"},
		},
		{
			name:     "english output",
			filename: "faq.xlsx",
			md:       "| Question | Answer |\n|---|---|\n| What is Yuxi? | A knowledge-agent platform. |\n",
			cfg:      english,
			want:     []string{"Question: What is Yuxi?\tAnswer: A knowledge-agent platform."},
		},
		{
			name:     "stacked headings are the question",
			filename: "manual.md",
			md:       "# 安装\n## 如何安装？\n运行安装程序。\n按提示完成。\n## 如何卸载？\n在设置中卸载。\n```\n# 不是标题\n```\n",
			want: []string{"问题：安装\n如何安装？\t回答：运行安装程序。\n按提示完成。",
				"问题：安装\n如何卸载？\t回答：在设置中卸载。\n```\n# 不是标题\n```"},
		},
		{
			name:     "Q:/A: prefixes keep an answer starting with the word A",
			filename: "faq.pdf",
			md:       "Q: What is Yuxi?\nA: A knowledge platform.\nIt also runs agents.\n\nQuestion: Is it free?\nAnswer: Yes, it is open source.",
			cfg:      english,
			want: []string{"Question: What is Yuxi?\tAnswer: A knowledge platform.\nIt also runs agents.",
				"Question: Is it free?\tAnswer: Yes, it is open source."},
		},
		{
			name:     "chinese prefixes",
			filename: "问答.docx",
			md:       "问：发票多久可以开出？\n答：三个工作日内。\n问题：可以开专票吗？\n回答：可以。",
			want:     []string{"问题：发票多久可以开出？\t回答：三个工作日内。", "问题：可以开专票吗？\t回答：可以。"},
		},
		{
			name:     "txt with tabs",
			filename: "qa.txt",
			md:       "什么是分块？\t把文档切成小段。\n为什么要分块？\t便于检索。\n检索更准确。",
			want:     []string{"问题：什么是分块？\t回答：把文档切成小段。", "问题：为什么要分块？\t回答：便于检索。\n检索更准确。"},
		},
		{
			name:     "txt with commas",
			filename: "qa.txt",
			md:       "What is RAG?,Retrieval-augmented generation\nWhy chunk?,To retrieve precisely",
			want: []string{"问题：What is RAG?\t回答：Retrieval-augmented generation",
				"问题：Why chunk?\t回答：To retrieve precisely"},
		},
		{
			name:     "csv honours quotes",
			filename: "qa.csv",
			md:       "\"Where, exactly?\",\"Here, in the docs\"\nWho?,Us",
			want:     []string{"问题：Where, exactly?\t回答：Here, in the docs", "问题：Who?\t回答：Us"},
		},
		{
			name:     "duplicates dropped",
			filename: "faq.md",
			md:       "| Q | A |\n|---|---|\n| 一 | 甲 |\n| 一 | 甲 |\n| 二 | 乙 |",
			want:     []string{"问题：一\t回答：甲", "问题：二\t回答：乙"},
		},
		{
			name:     "nothing recognised: consecutive lines paired",
			filename: "notes.txt",
			md:       "第一行问题\n第一行答案\n第二行问题\n第二行答案\n落单的一行",
			want:     []string{"问题：第一行问题\t回答：第一行答案", "问题：第二行问题\t回答：第二行答案"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			if cfg.ChunkTokenNum == 0 {
				cfg = chunk.DefaultConfig()
			}
			cs := split(t, "qa", tc.md, cfg, chunk.Options{Filename: tc.filename})
			if got := contents(cs); !equalStrings(got, tc.want) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			for _, c := range cs {
				if c.StartChar < 0 {
					t.Errorf("chunk %d not located", c.Index)
				}
			}
		})
	}
}

// A table row is located at its row, not at the document top.
func TestQALocatesPairs(t *testing.T) {
	t.Parallel()
	md := "# FAQ\n\n| 问题 | 答案 |\n|---|---|\n| 甲问题 | 甲答案 |\n| 乙问题 | 乙答案 |\n"
	cs := split(t, "qa", md, chunk.DefaultConfig(), chunk.Options{Filename: "faq.md"})
	if len(cs) != 2 || source(md, cs[1]) != "乙问题 | 乙答案" {
		t.Fatalf("got %q located at %q", contents(cs), source(md, cs[len(cs)-1]))
	}
	if !equalStrings(cs[1].Headings, []string{"FAQ"}) {
		t.Errorf("headings %q", cs[1].Headings)
	}
}

func TestQAHasNoTokenLimit(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("这个回答非常长，需要完整保留在一个问答块中。", 50)
	md := "## 长回答的问题是什么？\n" + answer
	cs := split(t, "qa", md, cfgN(64), chunk.Options{Filename: "faq.md"})
	if len(cs) != 1 || cs[0].TokenCount <= 64*3/2 || !strings.HasSuffix(cs[0].Content, answer) {
		t.Fatalf("got %d chunks (%d tokens); want the whole pair in one chunk", len(cs), cs[0].TokenCount)
	}
}
