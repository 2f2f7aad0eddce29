package chunk_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

func TestPresets(t *testing.T) {
	t.Parallel()
	ps := chunk.Presets()
	var ids []string
	han := regexp.MustCompile(`\p{Han}`)
	latin := regexp.MustCompile(`[A-Za-z]{4,}`)
	for _, p := range ps {
		ids = append(ids, p.ID)
		if p.Label == "" || !han.MatchString(p.Description) || !latin.MatchString(p.Description) {
			t.Errorf("preset %q: label %q, description %q: want a label and a Chinese+English description", p.ID, p.Label, p.Description)
		}
		if chunk.ResolvePreset(p.ID) != p.ID {
			t.Errorf("ResolvePreset(%q) = %q", p.ID, chunk.ResolvePreset(p.ID))
		}
	}
	want := []string{"general", "qa", "book", "laws", "semantic", "separator"}
	if !equalStrings(ids, want) {
		t.Fatalf("preset ids %v, want %v", ids, want)
	}
}

func TestResolvePreset(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":             "general",
		"general":      "general",
		"naive":        "general",
		" NAIVE ":      "general",
		"QA":           "qa",
		"Semantic":     "semantic",
		"separator":    "separator",
		"laws":         "laws",
		"book":         "book",
		"manual":       "general",
		"lightrag":     "general",
		"presentation": "general",
	}
	for in, want := range cases {
		if got := chunk.ResolvePreset(in); got != want {
			t.Errorf("ResolvePreset(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every preset drops empty and blank input, numbers its chunks 0..n-1
// without gaps, and locates them in the input.
func TestSplitCommonContract(t *testing.T) {
	t.Parallel()
	doc := "# 标题\n\n---\n\n第一段内容，包含一些文字。\n\n| a | b |\n|---|---|\n| 问 | 答 |\n\n   \n\nSecond paragraph in English.\n"
	for _, p := range chunk.Presets() {
		t.Run(p.ID, func(t *testing.T) {
			t.Parallel()
			for _, blank := range []string{"", "   \n\t\n  "} {
				if cs := split(t, p.ID, blank, chunk.DefaultConfig(), chunk.Options{Filename: "a.md"}); len(cs) != 0 {
					t.Errorf("blank input gave %d chunks: %q", len(cs), contents(cs))
				}
			}
			cs := split(t, p.ID, doc, cfgN(64), chunk.Options{Filename: "a.md"})
			if len(cs) == 0 {
				t.Fatal("no chunks")
			}
			for _, c := range cs {
				if c.StartChar < 0 {
					t.Errorf("chunk %d not located: %q", c.Index, c.Content)
				}
			}
		})
	}
}

// Strict custom delimiters produce an empty piece between two adjacent
// delimiters; it is dropped and the following chunks are renumbered.
func TestEmptyChunksAreRenumbered(t *testing.T) {
	t.Parallel()
	md := "first part\n---\n \n---\nsecond part\n---\n---\nthird part"
	cfg := chunk.DefaultConfig()
	cfg.Delimiter = "`---`"
	for _, preset := range []string{"general", "separator"} {
		cs := split(t, preset, md, cfg, chunk.Options{})
		want := []string{"first part", "second part", "third part"}
		if !equalStrings(contents(cs), want) {
			t.Fatalf("%s: %q, want %q", preset, contents(cs), want)
		}
		for i, c := range cs {
			if c.Index != i || source(md, c) != want[i] {
				t.Errorf("%s: chunk %d Index %d at %q", preset, i, c.Index, source(md, c))
			}
		}
	}
}

func TestUnknownPresetIsGeneral(t *testing.T) {
	t.Parallel()
	md := strings.Repeat("Some line of text that repeats.\n", 40)
	a := split(t, "no-such-preset", md, cfgN(32), chunk.Options{})
	b := split(t, "general", md, cfgN(32), chunk.Options{})
	if !equalStrings(contents(a), contents(b)) {
		t.Fatal("an unknown preset did not chunk like general")
	}
}

func TestSplitHonoursCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := chunk.Split(ctx, "general", "text", chunk.DefaultConfig(), chunk.Options{}); err == nil {
		t.Fatal("Split with a cancelled context succeeded")
	}
}
