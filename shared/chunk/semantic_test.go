package chunk_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

const semanticDoc = "# Yuxi Guide\n\n" +
	"Yuxi is a knowledge-agent platform.\n\n" +
	"## Install\n\n" +
	"Run the installer, then start the services:\n\n" +
	"```bash\n" +
	"make services\n\n" +
	"make run\n" +
	"```\n\n" +
	"| Service | Port |\n" +
	"|---|---|\n" +
	"| api | 5050 |\n" +
	"| web | 5173 |\n\n" +
	"### Requirements\n\n" +
	"You need:\n\n" +
	"- Go 1.26\n" +
	"- PostgreSQL 15\n" +
	"  - with pgvector\n\n" +
	"$$\n" +
	"E = mc^2\n" +
	"$$\n\n" +
	"Setext Section\n" +
	"--------------\n\n" +
	"![diagram](img/arch.png)\n\n" +
	"图1 系统架构\n"

func TestSemanticStructure(t *testing.T) {
	t.Parallel()
	cs := split(t, "semantic", semanticDoc, cfgN(128), chunk.Options{})
	want := []struct {
		content  string
		headings []string
	}{
		{"# Yuxi Guide\nYuxi is a knowledge-agent platform.", []string{"Yuxi Guide"}},
		{"## Yuxi Guide|Install\nRun the installer, then start the services:\n\n```bash\nmake services\n\nmake run\n```",
			[]string{"Yuxi Guide", "Install"}},
		{"## Yuxi Guide|Install|Table\n| Service | Port |\n|---|---|\n| api | 5050 |\n| web | 5173 |",
			[]string{"Yuxi Guide", "Install"}},
		{"### Yuxi Guide|Install|Requirements\nYou need:\n\n- Go 1.26\n- PostgreSQL 15\n  - with pgvector",
			[]string{"Yuxi Guide", "Install", "Requirements"}},
		{"### Yuxi Guide|Install|Requirements|Math Block\n$$\nE = mc^2\n$$",
			[]string{"Yuxi Guide", "Install", "Requirements"}},
		{"## Yuxi Guide|Setext Section|图1 系统架构\n![diagram](img/arch.png)\n\n图1 系统架构",
			[]string{"Yuxi Guide", "Setext Section"}},
	}
	if len(cs) != len(want) {
		t.Fatalf("got %d chunks:\n%s", len(cs), strings.Join(contents(cs), "\n---\n"))
	}
	for i, w := range want {
		if cs[i].Content != w.content || !equalStrings(cs[i].Headings, w.headings) {
			t.Errorf("chunk %d:\n%q %q\nwant\n%q %q", i, cs[i].Content, cs[i].Headings, w.content, w.headings)
		}
	}
	if got := source(semanticDoc, cs[2]); got != "| Service | Port |\n|---|---|\n| api | 5050 |\n| web | 5173 |" {
		t.Errorf("table located at %q", got)
	}
}

// Content over the limit is split into parts, each with the header and
// "|Part n"; tables repeat their header rows, fences their fence lines.
func TestSemanticSplitsOversizedContent(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Handbook\n\n## Policies\n\n")
	for i := range 8 {
		b.WriteString("Policy " + itoa(i) + " covers " + words("rule", i*12, 12) + ".\n\n")
	}
	b.WriteString("## Data\n\n| id | name | note |\n|---|---|---|\n")
	for i := range 30 {
		b.WriteString("| " + itoa(i) + " | item" + itoa(i) + " | " + words("n", i*3, 3) + " |\n")
	}
	b.WriteString("\n## Code\n\n```go\n")
	for i := range 40 {
		b.WriteString("x" + itoa(i) + " := compute(" + itoa(i) + ")\n")
	}
	b.WriteString("```\n")
	md := b.String()
	const n = 48
	cs := split(t, "semantic", md, cfgN(n), chunk.Options{})
	maxTokens(t, cs, n)
	parts := map[string]int{}
	for _, c := range cs {
		header, body, _ := strings.Cut(c.Content, "\n")
		switch {
		case strings.HasPrefix(header, "## Handbook|Policies|Part "):
			parts["policies"]++
			if !strings.HasPrefix(body, "Policy ") {
				t.Errorf("policy part does not start at a paragraph: %q", body)
			}
		case strings.HasPrefix(header, "## Handbook|Data|Table|Part "):
			parts["table"]++
			if !strings.HasPrefix(body, "| id | name | note |\n|---|---|---|\n| ") {
				t.Errorf("table part without its header rows: %q", body)
			}
		case strings.HasPrefix(header, "## Handbook|Code|Part "):
			parts["code"]++
			if !strings.HasPrefix(body, "```go\nx") || !strings.HasSuffix(body, "\n```") {
				t.Errorf("code part not wrapped in its fence: %q", body)
			}
		default:
			t.Errorf("unexpected chunk header %q", header)
		}
	}
	for _, k := range []string{"policies", "table", "code"} {
		if parts[k] < 2 {
			t.Errorf("%s split into %d parts", k, parts[k])
		}
	}
	for i, c := range cs {
		if strings.Contains(c.Content, "|Part 1\n") {
			continue
		}
		if i > 0 && c.StartChar <= cs[i-1].StartChar {
			t.Errorf("part %d located at %d, not after part %d (%d)", i, c.StartChar, i-1, cs[i-1].StartChar)
		}
	}
}

// topicEmbedder is a hand-written fake at the model edge: sentences about
// cats and about markets point in orthogonal directions.
type topicEmbedder struct {
	calls atomic.Int32
	err   error
}

func (e *topicEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	if e.err != nil {
		return nil, e.err
	}
	out := make([][]float32, len(texts))
	for i, s := range texts {
		switch {
		case strings.Contains(s, "cat"):
			out[i] = []float32{1, 0.05}
		case strings.Contains(s, "market"):
			out[i] = []float32{0.05, 1}
		default:
			out[i] = []float32{0.7, 0.7}
		}
	}
	return out, nil
}

func topicLine() (string, []string) {
	cat := []string{"The cat sleeps on the warm windowsill.", "A cat purrs when it feels safe at home.",
		"Every cat needs fresh water and food.", "The old cat chases a red ball."}
	market := []string{"The stock market fell sharply on Monday.", "Bond market yields rose after the news.",
		"The market rallied when rates were cut.", "Analysts expect a calmer market next week."}
	groups := [][]string{cat[:3], market[:3], {cat[3], "The cat naps again.", "Later the cat wakes up hungry."}}
	var all []string
	for _, g := range groups {
		all = append(all, g...)
	}
	return strings.Join(all, " "), all
}

func TestSemanticClustersSentencesWithEmbedder(t *testing.T) {
	t.Parallel()
	line, _ := topicLine()
	md := "# Notes\n\n" + line
	const n = 40 // budget 37 after the header; the line has ~80 tokens: k = 3 runs
	emb := &topicEmbedder{}
	cs := split(t, "semantic", md, cfgN(n), chunk.Options{Embedder: emb})
	maxTokens(t, cs, n)
	if len(cs) != 3 {
		t.Fatalf("got %d parts, want k = 3: %q", len(cs), contents(cs))
	}
	if emb.calls.Load() == 0 {
		t.Fatal("the embedder was not used")
	}
	for _, c := range cs {
		if strings.Contains(c.Content, "cat") && strings.Contains(c.Content, "market") {
			t.Errorf("a part mixes topics: %q", c.Content)
		}
		if !strings.HasPrefix(c.Content, "# Notes|Part ") {
			t.Errorf("part without its header: %q", c.Content)
		}
	}
	// Greedy packing without an embedder fills parts regardless of topic.
	greedy := split(t, "semantic", md, cfgN(n), chunk.Options{})
	maxTokens(t, greedy, n)
	mixed := false
	for _, c := range greedy {
		mixed = mixed || strings.Contains(c.Content, "cat") && strings.Contains(c.Content, "market")
	}
	if !mixed {
		t.Fatalf("greedy packing happened to separate the topics; the test does not tell the two apart: %q", contents(greedy))
	}
	// Sentences are source text: the spaces between them are kept.
	for _, c := range append(cs, greedy...) {
		_, body, _ := strings.Cut(c.Content, "\n")
		if !strings.Contains(md, body) {
			t.Errorf("part is not a source substring: %q", body)
		}
	}
}

func TestSemanticEmbedderErrors(t *testing.T) {
	t.Parallel()
	line, _ := topicLine()
	boom := errors.New("provider down")
	_, err := chunk.Split(t.Context(), "semantic", line, cfgN(40), chunk.Options{Embedder: &topicEmbedder{err: boom}})
	if !errors.Is(err, boom) {
		t.Fatalf("Split error = %v, want the embedder's error", err)
	}
	// Short text needs no embedding.
	emb := &topicEmbedder{err: boom}
	if _, err := chunk.Split(t.Context(), "semantic", "# A\n\nShort text.", cfgN(40), chunk.Options{Embedder: emb}); err != nil || emb.calls.Load() != 0 {
		t.Fatalf("short text: %v, %d embed calls", err, emb.calls.Load())
	}
}

func TestSemanticSentenceSplitting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		line string
		bad  []string // no part may end with these
	}{
		{"abbreviations and initials are not sentence ends",
			strings.Repeat("Dr. Smith met J. K. Rowling at 3.5 p.m. in the U.S. office. They talked about books, e.g. novels. ", 6),
			[]string{"Dr.", " J.", " K.", "e.g.", "U.S."}},
		{"chinese ends keep their closing quotes",
			strings.Repeat("他说：“你好。”然后问：“你在吗？”最后大家一起离开了会议室！", 8),
			[]string{"“你好。", "“你在吗？"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := split(t, "semantic", "# T\n\n"+tc.line, cfgN(32), chunk.Options{})
			maxTokens(t, cs, 32)
			for _, c := range cs {
				for _, b := range tc.bad {
					if strings.HasSuffix(c.Content, b) {
						t.Errorf("part ends inside a sentence (%q): %q", b, c.Content)
					}
				}
			}
		})
	}
}

func TestSemanticLongHeadingPathIsShortened(t *testing.T) {
	t.Parallel()
	md := "# " + words("outer", 0, 20) + "\n\n## " + words("inner", 0, 20) + "\n\n" + words("body", 0, 30)
	cs := split(t, "semantic", md, cfgN(32), chunk.Options{})
	maxTokens(t, cs, 32)
	for _, c := range cs {
		header, _, _ := strings.Cut(c.Content, "\n")
		if chunk.CountTokens(header) > 32/4 {
			t.Errorf("header of %d tokens: %q", chunk.CountTokens(header), header)
		}
		if len(c.Headings) != 2 {
			t.Errorf("Headings %q: want the full path", c.Headings)
		}
	}
}
