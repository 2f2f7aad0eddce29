package multiprocess

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// restart replaces a function's process, with extra environment.
func (c *cluster) restart(t *testing.T, name string, extra testkit.Env) {
	t.Helper()
	c.procs[name].Kill()
	env := testkit.Env{"PORT": c.ports[name]}
	for k, v := range c.env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	c.procs[name] = testkit.StartProc(t, c.bins[name], env, "/healthz")
}

// Documents go through intake, doc-parse and kb-index as separate processes
// behind the broker; a doc-parse process killed in the middle of parsing is
// made good by the dispatcher's sweep.
func TestKnowledgeIngestionAcrossProcesses(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := newCluster(t)
	t.Logf("cluster up (binaries built) after %s", time.Since(start))
	api := c.client(t)
	ctx := context.Background()
	pool, err := postgres.Open(ctx, c.stack.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	kbID := api.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "manuals", "description": "across processes"})["kb_id"].(string)
	files := api.Ingest(kbID, map[string][]byte{"pump.md": []byte("# Pump manual\n\nPrime the centrifugal pump before the first start.\n")}, 30*time.Second)
	for id, f := range files {
		if f["status"] != "indexed" {
			t.Fatalf("%s: %v\n%s", id, f, c.logs())
		}
		if hits := fileHits(api, kbID, "centrifugal pump", id); hits != 1 {
			t.Errorf("query found the indexed chunk %d times", hits)
		}
	}
	for _, typ := range []string{events.TypeDocumentUploaded, events.TypeDocumentParsed} {
		if c.ingress.count(typ) == 0 {
			t.Errorf("no %s event crossed the broker", typ)
		}
	}
	t.Logf("first file indexed after %s", time.Since(start))
	var version0 int64
	if err := pool.QueryRow(ctx, `SELECT index_version FROM knowledge_bases WHERE kb_id = $1`, kbID).Scan(&version0); err != nil {
		t.Fatal(err)
	}

	// doc-parse dies (SIGKILL) after storing the Markdown, before committing
	// the parse; the broker's redeliveries find the stage held by the dead
	// attempt; once its lease (YUXI_FILE_LEASE) runs out the dispatcher's
	// sweep sends the file to doc-parse again.
	c.restart(t, "doc-parse", testkit.Env{"YUXI_CRASH_AT": "parse.before_commit"})
	up := api.Upload(kbID, "valve.md", []byte("# Valve manual\n\nClose the gate valve slowly to avoid water hammer.\n"))
	if up.Status != http.StatusOK {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	added := api.OK("POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": []string{up.JSON()["file_path"].(string)}, "params": map[string]any{}})
	fileID := added["items"].([]any)[0].(map[string]any)["file_id"].(string)
	if !c.procs["doc-parse"].Exited(30 * time.Second) {
		t.Fatalf("doc-parse did not reach its crash point\n%s", c.procs["doc-parse"].Logs)
	}
	if !strings.Contains(c.procs["doc-parse"].Logs.String(), "crash point parse.before_commit") {
		t.Fatalf("doc-parse exited otherwise:\n%s", c.procs["doc-parse"].Logs)
	}
	if st := api.OK("GET", "/api/knowledge/databases/"+kbID+"/documents/"+fileID+"/basic", nil)["meta"].(map[string]any)["status"]; st != "parsing" {
		t.Fatalf("after the crash the file is %v, want parsing", st)
	}
	t.Logf("doc-parse crashed after %s", time.Since(start))
	c.restart(t, "doc-parse", nil)

	var meta map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		meta = api.OK("GET", "/api/knowledge/databases/"+kbID+"/documents/"+fileID+"/basic", nil)["meta"].(map[string]any)
		if meta["status"] == "indexed" {
			break
		}
		if time.Now().After(deadline) || strings.HasPrefix(meta["status"].(string), "error") {
			t.Fatalf("file after the crash: %v\n%s", meta, c.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}

	t.Logf("recovered file indexed after %s", time.Since(start))

	// Exactly once: redriven by the sweep, one committed parse, one committed
	// index; the chunks are there once, in every index.
	var redrives, parsed int
	var version int64
	err = pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM outbox WHERE type = $2 AND source = $3 AND data->>'file_id' = $1),
		(SELECT count(*) FROM outbox WHERE type = $4 AND data->>'file_id' = $1),
		(SELECT index_version FROM knowledge_bases WHERE kb_id = $5)`,
		fileID, events.TypeDocumentUploaded, events.Source("dispatcher"), events.TypeDocumentParsed, kbID).Scan(&redrives, &parsed, &version)
	if err != nil {
		t.Fatal(err)
	}
	// (A sweep may re-drive again if a worker outlives the lease on a slow
	// machine; the attempt guard still lets one parse and one index commit.)
	if redrives < 1 || parsed != 1 || version != version0+1 {
		t.Errorf("sweep redrives %d (want ≥ 1), parsed events %d, index commits %d (want 1 each)", redrives, parsed, version-version0)
	}
	var chunks, vectors, keywordDocs, failures int
	err = pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM knowledge_chunks WHERE file_id = $1),
		(SELECT count(*) FROM vector_items WHERE grp = $1),
		(SELECT count(*) FROM keyword_docs WHERE starts_with(doc_id, $1 || '_')),
		(SELECT count(*) FROM event_failures)`, fileID).Scan(&chunks, &vectors, &keywordDocs, &failures)
	if err != nil {
		t.Fatal(err)
	}
	if n := int(meta["chunk_count"].(float64)); n < 1 || chunks != n || vectors != n || keywordDocs != n || failures != 0 {
		t.Errorf("chunk_count %d: %d chunks, %d vectors, %d keyword docs; %d event failures", n, chunks, vectors, keywordDocs, failures)
	}
	if hits := fileHits(api, kbID, "gate valve water hammer", fileID); hits != chunks {
		t.Errorf("query found the recovered file's chunks %d times, want %d", hits, chunks)
	}
}

// fileHits counts a hybrid query's hits in fileID.
func fileHits(api *testkit.Client, kbID, query, fileID string) int {
	n := 0
	for _, h := range api.QueryKB(kbID, query, "hybrid") {
		if h["file_id"] == fileID {
			n++
		}
	}
	return n
}
