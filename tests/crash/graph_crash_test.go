package crash

// Graph extraction (kb-graph) under SIGKILL: the all-in-one process dies
// right after the fifth chunk's extraction is written and marked done, is
// restarted on the same database, and the graph must complete from the
// persisted per-chunk progress: every chunk done once, the chunks done
// before the crash not extracted again, and the same graph as the scripted
// extractor gives for the chunks.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestGraphBuildSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, "./infra/local/cmd/yuxi-server")
	st := testkit.NewStack(t)
	var calls atomic.Int64
	testkit.ScriptedExtractor(st.LLM, &calls)
	port := testkit.FreePort(t)
	env := ingestEnv(st, port)
	p := testkit.StartProc(t, bin, ingestEnv(st, port, "YUXI_CRASH_AT", "graph.chunk_extracted:5"), "/api/system/health")
	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := (&testkit.Client{T: t, Base: p.URL}).Login("admin", "admin-password")
	kbID := c.NewKnowledgeBase("graph-crash", "graph extraction under SIGKILL", nil)
	c.OK("POST", "/api/knowledge/databases/"+kbID+"/graph-build/config", map[string]any{"llm_model_spec": "fake:extract", "concurrency": 2})
	names := []string{"Kira", "Lumo", "Vesta", "Orin", "Talla", "Mirek"}
	files := map[string][]byte{}
	for i := 0; i < 3; i++ {
		var b strings.Builder
		fmt.Fprintf(&b, "# Journal part %d\n\n", i)
		for l := 0; l < 8; l++ {
			fmt.Fprintf(&b, "On day %d the scout %s met %s near the tower of %s.\n", l, names[(i+l)%6], names[(i+l+1)%6], names[(i+2*l)%6])
		}
		files[fmt.Sprintf("journal-%d.md", i)] = []byte(b.String())
	}
	items := c.UploadAll(kbID, files)
	if r, err := c.TryDo("POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": items, "params": smallChunks}); err == nil && r.Status != http.StatusOK {
		t.Fatalf("add documents: %d %s", r.Status, r.Body)
	}
	if !p.Exited(40 * time.Second) {
		t.Fatalf("crash point never reached\n%s", p.Logs.String())
	}
	var doneAtCrash int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM graph_chunk_extractions WHERE kb_id = $1 AND status = 'done'`, kbID).Scan(&doneAtCrash); err != nil {
		t.Fatal(err)
	}
	callsAtCrash := calls.Load()
	t.Logf("crashed with %d chunks done, %d extraction calls", doneAtCrash, callsAtCrash)
	if doneAtCrash < 5 {
		t.Fatalf("%d chunks done at the crash, want at least 5", doneAtCrash)
	}

	p = testkit.StartProc(t, bin, env, "/api/system/health")
	c.Base = p.URL
	testkit.WaitKBFilesIndexed(t, pool, kbID, 3, 40*time.Second)
	status := c.WaitGraphBuilt(kbID, 60*time.Second)
	total := int64(status["total_chunks"].(float64))
	if status["done_chunks"] != status["total_chunks"] || status["failed_chunks"] != float64(0) {
		t.Fatalf("status after restart: %v", status)
	}
	// Chunks done before the crash are not extracted again; at most the
	// ones in flight at the crash (concurrency 2, per file) are redone.
	t.Logf("after the restart: %d chunks done, %d extraction calls in all", total, calls.Load())
	if n := calls.Load(); n > total+int64(2*3) || n < total {
		t.Fatalf("%d extraction calls for %d chunks", n, total)
	}
	// The graph is the scripted extractor's annotation of the chunks.
	rows, err := pool.Query(context.Background(), `SELECT content FROM knowledge_chunks WHERE kb_id = $1`, kbID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for rows.Next() {
		var content string
		if err := rows.Scan(&content); err != nil {
			t.Fatal(err)
		}
		for _, e := range testkit.ExtractGraph(content)["entities"].([]map[string]any) {
			want[e["name"].(string)] = true
		}
	}
	rows.Close()
	got := c.SubgraphNames(t, kbID)
	if len(got) != len(want) {
		t.Fatalf("graph entities %v, want %v", got, want)
	}
	for n := range want {
		if !got[n] {
			t.Fatalf("graph lacks %s: %v", n, got)
		}
	}
	if t.Failed() {
		t.Logf("process log:\n%s", p.Logs.String())
	}
}
