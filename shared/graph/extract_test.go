package graph_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// annotator is a deterministic scripted extractor: every "X rel Y." sentence
// of the chunk becomes a relation between two Person entities; a chunk
// containing "GARBAGE" gets a reply that is not JSON while garbage is set.
func annotator(garbage *atomic.Bool, calls *atomic.Int64) func(llmtest.ChatRequest) llmtest.Reply {
	re := regexp.MustCompile(`(\w+) (\w+) (\w+)\.`)
	return func(req llmtest.ChatRequest) llmtest.Reply {
		calls.Add(1)
		text := req.LastUserMessage()
		if strings.Contains(text, "GARBAGE") && garbage.Load() {
			return llmtest.Text("I cannot help with that")
		}
		var ents, rels []string
		for _, m := range re.FindAllStringSubmatch(text[strings.Index(text, "Text:"):], -1) {
			ents = append(ents, fmt.Sprintf(`{"name":%q,"type":"Person"}`, m[1]), fmt.Sprintf(`{"name":%q,"type":"Person"}`, m[3]))
			rels = append(rels, fmt.Sprintf(`{"source":%q,"target":%q,"type":%q}`, m[1], m[3], m[2]))
		}
		return llmtest.Text("```json\n{\"entities\":["+strings.Join(ents, ",")+"],", "\"relations\":["+strings.Join(rels, ",")+"]}\n```")
	}
}

func TestExtractFileIsIncrementalAndResumable(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	eng := graph.NewPostgres(pool)
	ex := graph.NewExtractor(pool, eng)
	ex.Backoff = func(int) time.Duration { return 0 }
	srv := llmtest.NewServer(t)
	var garbage atomic.Bool
	var calls atomic.Int64
	srv.Handle(annotator(&garbage, &calls))
	model := llm.NewClient(llm.Provider{ID: "fake", BaseURL: srv.URL()}, nil)
	schema := graph.Schema{EntityTypes: []string{"Person"}, RelationTypes: []string{"knows", "likes"}}

	chunks := []graph.ChunkText{
		{ID: "f_1", Content: "Alice knows Bob."},
		{ID: "f_2", Content: "Bob likes Carol."},
		{ID: "f_3", Content: "Carol knows Dave. GARBAGE"},
	}
	garbage.Store(true)
	res, err := ex.ExtractFile(ctx, "kb", "f", chunks, schema, model, "m", 2)
	if err == nil || res.Extracted != 2 || res.Failed != 1 {
		t.Fatalf("first pass: %+v, %v; want 2 extracted, 1 failed and an error", res, err)
	}
	// The bad reply is tried ex.Tries (3) times in the delivery.
	if calls.Load() != 5 {
		t.Fatalf("model calls = %d, want 5 (2 + 3 tries of f_3)", calls.Load())
	}
	if req := srv.Requests()[0]; !strings.Contains(req.LastUserMessage(), "Relation types: knows, likes") || req.Messages[0].Content != graph.Prompt {
		t.Fatalf("request does not carry the fixed prompt and the schema: %+v", req.Messages)
	}
	// Redelivery: only the failed chunk is asked again.
	garbage.Store(false)
	res, err = ex.ExtractFile(ctx, "kb", "f", chunks, schema, model, "m", 2)
	if err != nil || res.Extracted != 1 || res.Skipped != 2 || calls.Load() != 6 {
		t.Fatalf("redelivery: %+v, %v, calls %d; want only f_3 extracted", res, err, calls.Load())
	}
	if s, _ := eng.Stats(ctx, "kb"); s.Entities != 4 || s.Relations != 3 {
		t.Fatalf("graph = %+v, want 4 entities, 3 relations", s)
	}
	// Re-index: f_2's content changed (new content-addressed id f_2b).
	// Only it is extracted; the old chunk's graph goes, and with it the
	// likes relation nothing else states.
	chunks[1] = graph.ChunkText{ID: "f_2b", Content: "Bob knows Erin."}
	res, err = ex.ExtractFile(ctx, "kb", "f", chunks, schema, model, "m", 2)
	if err != nil || res.Extracted != 1 || res.Skipped != 2 || res.Removed != 1 || calls.Load() != 7 {
		t.Fatalf("re-index: %+v, %v, calls %d", res, err, calls.Load())
	}
	found, _ := eng.FindEntities(ctx, "kb", "*", 10)
	var names []string
	for _, e := range found {
		names = append(names, e.Name)
	}
	if s, _ := eng.Stats(ctx, "kb"); s.Entities != 5 || s.Relations != 3 {
		t.Fatalf("graph after re-index = %+v (%v), want Alice Bob Carol Dave Erin and 3 knows relations", s, names)
	}
	// Unchanged file: nothing asked.
	if res, err := ex.ExtractFile(ctx, "kb", "f", chunks, schema, model, "m", 2); err != nil || res.Skipped != 3 || calls.Load() != 7 {
		t.Fatalf("unchanged: %+v, %v, calls %d", res, err, calls.Load())
	}
}

func TestExtractFileBoundsConcurrency(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	ex := graph.NewExtractor(pool, graph.NewPostgres(pool))
	var inFlight, peak atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	model := modelFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == 3 {
			once.Do(func() { close(release) }) // all three slots taken at once (later calls may fill them again)
		}
		<-release
		return llm.Response{Content: `{"entities":[],"relations":[]}`}, nil
	})
	var chunks []graph.ChunkText
	for i := range 12 {
		chunks = append(chunks, graph.ChunkText{ID: fmt.Sprintf("c%d", i), Content: "x"})
	}
	res, err := ex.ExtractFile(ctx, "kb", "f", chunks, graph.Schema{}, model, "m", 3)
	if err != nil || res.Extracted != 12 {
		t.Fatalf("%+v, %v", res, err)
	}
	if peak.Load() != 3 {
		t.Fatalf("peak concurrency = %d, want 3", peak.Load())
	}
}

type modelFunc func(ctx context.Context, req llm.Request) (llm.Response, error)

func (f modelFunc) Stream(ctx context.Context, req llm.Request, _ func(llm.Delta) error) (llm.Response, error) {
	return f(ctx, req)
}

func TestParseExtraction(t *testing.T) {
	x, err := graph.ParseExtraction("Sure!\n```json\n{\"entities\":[{\"name\":\"A\",\"type\":\"T\"}],\"relations\":[]}\n```")
	if err != nil || len(x.Entities) != 1 || x.Entities[0].Name != "A" {
		t.Fatalf("%+v, %v", x, err)
	}
	if _, err := graph.ParseExtraction("no"); err == nil {
		t.Fatal("prose accepted")
	}
}

// A chunk that keeps failing is given up after MaxAttempts deliveries: the
// next delivery skips it and succeeds, so the event stops being retried.
func TestExtractFileGivesUpAfterMaxAttempts(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	ex := graph.NewExtractor(pool, graph.NewPostgres(pool))
	ex.Tries, ex.MaxAttempts = 1, 2
	srv := llmtest.NewServer(t)
	var garbage atomic.Bool
	var calls atomic.Int64
	garbage.Store(true)
	srv.Handle(annotator(&garbage, &calls))
	model := llm.NewClient(llm.Provider{ID: "fake", BaseURL: srv.URL()}, nil)
	chunks := []graph.ChunkText{{ID: "g_1", Content: "Erin knows Finn. GARBAGE"}}
	for i := 0; i < 2; i++ {
		if res, err := ex.ExtractFile(ctx, "kb", "g", chunks, graph.Schema{}, model, "m", 1); err == nil || res.Failed != 1 {
			t.Fatalf("delivery %d: %+v, %v", i+1, res, err)
		}
	}
	res, err := ex.ExtractFile(ctx, "kb", "g", chunks, graph.Schema{}, model, "m", 1)
	if err != nil || res.GaveUp != 1 || calls.Load() != 2 {
		t.Fatalf("third delivery: %+v, %v, calls %d", res, err, calls.Load())
	}
}
