package chunk_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

var idRe = regexp.MustCompile(`^file_42_[0-9a-f]{16}(_[0-9]+)?$`)

func paragraphs(n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "Paragraph " + itoa(i) + " says something different about topic " + itoa(i*7) + "."
	}
	return ps
}

func TestChunkIDsAreStable(t *testing.T) {
	t.Parallel()
	md := strings.Join(paragraphs(12), "\n\n")
	for _, p := range chunk.Presets() {
		t.Run(p.ID, func(t *testing.T) {
			t.Parallel()
			a := chunk.ChunkIDs("file_42", split(t, p.ID, md, cfgN(32), chunk.Options{Filename: "doc.md"}))
			b := chunk.ChunkIDs("file_42", split(t, p.ID, md, cfgN(32), chunk.Options{Filename: "doc.md"}))
			if !equalStrings(a, b) {
				t.Fatalf("re-chunking changed ids:\n%v\n%v", a, b)
			}
			for _, id := range a {
				if !idRe.MatchString(id) {
					t.Errorf("id %q does not look like file_42_<16 hex>[_n]", id)
				}
			}
		})
	}
}

// Inserting a paragraph (a section, an article, a pair) at the top changes
// no id of a chunk whose content is unchanged — position does not matter —
// and every id stays unique.
func TestChunkIDsSurviveInsertion(t *testing.T) {
	t.Parallel()
	long := func(i int) string { // 20 tokens: one general chunk each at 16
		return "Paragraph " + itoa(i) + " " + words("detail", i*20, 18) + "."
	}
	var longs, sections, articles, pairs []string
	for i := range 8 {
		longs = append(longs, long(i+1))
		sections = append(sections, "## Part "+itoa(i+1)+"\n\n"+paragraphs(9)[i+1])
		articles = append(articles, "第"+itoa(i+1)+"条 本条规定第"+itoa(i+1)+"项事务的办理方式。")
		pairs = append(pairs, "Q: Question number "+itoa(i+1)+"?\nA: Answer number "+itoa(i+1)+".")
	}
	cases := []struct {
		preset, before, insert string
		cfg                    chunk.Config
	}{
		{"separator", strings.Join(paragraphs(10), "\n\n"), "A brand new introduction.",
			chunk.Config{ChunkTokenNum: 64, Delimiter: "\n\n"}},
		{"general", strings.Join(longs, "\n\n"), long(0), cfgN(16)},
		{"semantic", "# Manual\n\n" + strings.Join(sections, "\n\n"), "## Preface\n\nA brand new preface.", cfgN(64)},
		{"book", "# Manual\n\n" + strings.Join(sections, "\n\n"), "## Preface\n\nA brand new preface.", cfgN(64)},
		{"laws", "第一章 总则\n" + strings.Join(articles, "\n"), "第零条 新增的条文。", cfgN(64)},
		{"qa", strings.Join(pairs, "\n"), "Q: A new question?\nA: A new answer.", chunk.DefaultConfig()},
	}
	for _, tc := range cases {
		t.Run(tc.preset, func(t *testing.T) {
			t.Parallel()
			after := tc.before
			if tc.preset == "semantic" || tc.preset == "book" {
				after = strings.Replace(tc.before, "# Manual\n\n", "# Manual\n\n"+tc.insert+"\n\n", 1)
			} else if tc.preset == "laws" {
				after = strings.Replace(tc.before, "第一章 总则\n", "第一章 总则\n"+tc.insert+"\n", 1)
			} else {
				after = tc.insert + "\n\n" + tc.before
			}
			old := split(t, tc.preset, tc.before, tc.cfg, chunk.Options{Filename: "doc.pdf"})
			cur := split(t, tc.preset, after, tc.cfg, chunk.Options{Filename: "doc.pdf"})
			oldIDs := chunk.ChunkIDs("file_42", old)
			curIDs := chunk.ChunkIDs("file_42", cur)
			byContent := map[string]string{}
			for i, c := range old {
				byContent[c.Content] = oldIDs[i]
			}
			kept, changed := 0, 0
			seen := map[string]bool{}
			for i, c := range cur {
				if seen[curIDs[i]] {
					t.Errorf("duplicate id %s", curIDs[i])
				}
				seen[curIDs[i]] = true
				if id, ok := byContent[c.Content]; ok {
					kept++
					if id != curIDs[i] {
						t.Errorf("chunk %q: id %s became %s", c.Content, id, curIDs[i])
					}
					continue
				}
				changed++
				for _, oid := range oldIDs {
					if oid == curIDs[i] {
						t.Errorf("changed chunk %q reuses old id %s", c.Content, oid)
					}
				}
			}
			if changed != 1 || kept != len(old) {
				t.Fatalf("%d chunks changed, %d of %d kept; want only the inserted one new:\n%q", changed, kept, len(old), contents(cur))
			}
		})
	}
}

func TestChunkIDsForDuplicateContent(t *testing.T) {
	t.Parallel()
	md := "Same text.\n\nOther text.\n\nSame text.\n\nSame text."
	cs := split(t, "separator", md, chunk.Config{ChunkTokenNum: 64, Delimiter: "\n\n"}, chunk.Options{})
	ids := chunk.ChunkIDs("file_42", cs)
	if len(ids) != 4 {
		t.Fatalf("got %d chunks", len(ids))
	}
	base := ids[0]
	want := []string{base, ids[1], base + "_2", base + "_3"}
	if !equalStrings(ids, want) || ids[1] == base {
		t.Fatalf("ids %v, want the n-th repetition suffixed _n: %v", ids, want)
	}
	// Each repetition is located at its own occurrence.
	if cs[2].StartChar <= cs[0].StartChar || cs[3].StartChar <= cs[2].StartChar {
		t.Fatalf("repeated chunks located at %d, %d, %d", cs[0].StartChar, cs[2].StartChar, cs[3].StartChar)
	}
}

func TestChunkIDsWithoutHash(t *testing.T) {
	t.Parallel()
	cs := split(t, "separator", "alpha\nbeta", chunk.DefaultConfig(), chunk.Options{})
	want := chunk.ChunkIDs("f", cs)
	bare := []chunk.Chunk{{Content: cs[0].Content}, {Content: cs[1].Content}}
	if got := chunk.ChunkIDs("f", bare); !equalStrings(got, want) {
		t.Fatalf("ids from content alone %v, want %v", got, want)
	}
	if got := chunk.ChunkIDs("f", nil); len(got) != 0 {
		t.Fatalf("ChunkIDs(nil) = %v", got)
	}
}
