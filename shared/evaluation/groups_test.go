package evaluation

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
)

type oneRetriever struct{}

func (oneRetriever) Query(context.Context, kb.KB, string, kb.Retrieval, string) ([]kb.Result, error) {
	return nil, nil
}

type manyRetriever struct{ oneRetriever }

func (manyRetriever) QueryMany(context.Context, kb.KB, []string, kb.Retrieval) ([][]kb.Result, []error) {
	return nil, nil
}

// A keyword run without models is retrieved in min(Concurrency, cores)
// groups of about equal size; any other run one item per unit.
func TestGroups(t *testing.T) {
	cores := runtime.GOMAXPROCS(0)
	keyword := RunConfig{Retrieval: kb.Retrieval{SearchMode: "keyword"}}
	hybrid := RunConfig{Retrieval: kb.Retrieval{SearchMode: "hybrid"}}
	reranked := RunConfig{Retrieval: kb.Retrieval{SearchMode: "keyword", UseReranker: true}}
	var model llm.ChatModel = struct{ llm.ChatModel }{}
	for _, c := range []struct {
		ret         Retriever
		concurrency int
		n           int
		cfg         RunConfig
		env         runEnv
		want        string
	}{
		{manyRetriever{}, 4, 10, keyword, runEnv{}, map[bool]string{true: "[[0 3] [3 6] [6 8] [8 10]]", false: ""}[cores >= 4]},
		{manyRetriever{}, 2, 10, keyword, runEnv{}, map[bool]string{true: "[[0 5] [5 10]]", false: "[[0 10]]"}[cores >= 2]},
		{manyRetriever{}, 1, 10, keyword, runEnv{}, "[[0 10]]"},
		{manyRetriever{}, 4, 1, keyword, runEnv{}, "[[0 1]]"},
		{manyRetriever{}, 4, 0, keyword, runEnv{}, "[]"},
		{manyRetriever{}, 2, 3, hybrid, runEnv{}, "[[0 1] [1 2] [2 3]]"},
		{manyRetriever{}, 2, 3, reranked, runEnv{}, "[[0 1] [1 2] [2 3]]"},
		{manyRetriever{}, 2, 3, keyword, runEnv{answer: model}, "[[0 1] [1 2] [2 3]]"},
		{oneRetriever{}, 2, 3, keyword, runEnv{}, "[[0 1] [1 2] [2 3]]"},
	} {
		if c.want == "" {
			continue // needs more cores than this machine has
		}
		s := &Service{ret: c.ret, cfg: Config{Concurrency: c.concurrency}}
		if got := fmt.Sprint(s.groups(c.n, c.cfg, c.env)); got != c.want {
			t.Errorf("%T concurrency %d, %d items, %+v: groups %s, want %s", c.ret, c.concurrency, c.n, c.cfg.Retrieval.SearchMode, got, c.want)
		}
	}
	if cores == 2 {
		s := &Service{ret: manyRetriever{}, cfg: Config{Concurrency: 4}}
		if got := fmt.Sprint(s.groups(10, keyword, runEnv{})); got != "[[0 5] [5 10]]" {
			t.Errorf("2 cores, concurrency 4: %s, want two groups", got)
		}
	}
}

// A grouped run evaluates at most min(Concurrency, cores) groups at once
// (across batches); any other run Concurrency items.
func TestAtOnce(t *testing.T) {
	cores := runtime.GOMAXPROCS(0)
	keyword := RunConfig{Retrieval: kb.Retrieval{SearchMode: "keyword"}}
	s := &Service{ret: manyRetriever{}, cfg: Config{Concurrency: 64}}
	if got := s.atOnce(keyword, runEnv{}); got != min(64, cores) {
		t.Errorf("grouped run: %d at once, want %d", got, min(64, cores))
	}
	if got := s.atOnce(RunConfig{Retrieval: kb.Retrieval{SearchMode: "hybrid"}}, runEnv{}); got != 64 {
		t.Errorf("hybrid run: %d at once, want 64", got)
	}
	if got := (&Service{ret: oneRetriever{}, cfg: Config{Concurrency: 3}}).atOnce(keyword, runEnv{}); got != 3 {
		t.Errorf("retriever without QueryMany: %d at once, want 3", got)
	}
}
