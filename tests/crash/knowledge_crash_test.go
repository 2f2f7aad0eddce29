package crash

// Ingestion (doc-parse, kb-index) under SIGKILL: the all-in-one process is
// killed at each named crash point of the pipeline and at random moments
// while a batch of files ingests, restarted on the same database, Redis and
// object store, and every file must end indexed exactly once — one set of
// chunks, the same set in the keyword index and the vector store, searchable
// once — with nothing left between stages.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// ingestEnv is a scenario's platform environment: short file stages, so
// that the sweep re-drives a dead worker's file within a few seconds (the
// stack's defaults are 5s and 3s), and extra KEY, VALUE pairs over them.
func ingestEnv(st testkit.Stack, port string, extra ...string) testkit.Env {
	e := testkit.Env{"PORT": port, "YUXI_FILE_LEASE": "2s", "YUXI_FILE_GRACE": "1s"}
	for i := 0; i+1 < len(extra); i += 2 {
		e[extra[i]] = extra[i+1]
	}
	return st.Env(e)
}

// smallChunks makes every line (about 14 tokens) a chunk or two: the big
// document then needs several embedding batches of 64.
var smallChunks = map[string]any{"chunk_parser_config": map[string]any{"chunk_token_num": 16}}

// marker is a word that occurs once, in one line, of file i.
func marker(i int) string { return fmt.Sprintf("zq%dmarker", i) }

// document writes lines distinct lines, line markAt carrying file i's marker.
func document(i, lines, markAt int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Handbook part %d\n\n", i)
	for l := 0; l < lines; l++ {
		if l == markAt {
			fmt.Fprintf(&b, "The escalation contact for part %d is %s, reachable on weekdays only.\n", i, marker(i))
			continue
		}
		fmt.Fprintf(&b, "Rule %d.%d: requests of type %d are answered within %d days by team %d of region %d.\n",
			i, l, l*7+i, l%9+1, l%13, (l*31+i)%17)
	}
	return []byte(b.String())
}

// ingestFiles is a batch: small files and one large one that takes several
// embedding batches (about 300 chunks of small chunking).
func ingestFiles(n int) map[string][]byte {
	files := map[string][]byte{}
	for i := 0; i < n-1; i++ {
		files[fmt.Sprintf("part-%02d.md", i)] = document(i, 12+i%5, 3)
	}
	files[fmt.Sprintf("part-%02d.md", n-1)] = document(n-1, 300, 150)
	return files
}

type ingestScenario struct {
	name    string
	crashAt string // named crash point, or ""
	kills   int    // external SIGKILLs at random moments of the ingestion (when crashAt is "")
	seed    uint64
	files   int
}

func TestIngestionSurvivesSIGKILL(t *testing.T) {
	bin := testkit.Build(t, "./infra/local/cmd/yuxi-server")
	scenarios := []ingestScenario{
		{name: "parse-claimed", crashAt: "parse.claimed", files: 3},
		{name: "parse-before-commit", crashAt: "parse.before_commit", files: 3},
		{name: "index-claimed", crashAt: "index.claimed", files: 3},
		// The large file's second batch: vectors and cached embeddings of
		// two batches written, nothing committed.
		{name: "index-batch-embedded", crashAt: "index.batch_embedded:2", files: 1},
		{name: "index-before-commit", crashAt: "index.before_commit", files: 3},
		{name: "index-after-commit", crashAt: "index.after_commit", files: 3},
	}
	seed := uint64(time.Now().UnixNano())
	scenarios = append(scenarios,
		ingestScenario{name: "random-kill-1", kills: 1, seed: seed, files: 10},
		ingestScenario{name: "random-kill-2", kills: 1, seed: seed + 1, files: 10},
		// Killed again while the restarted process recovers the batch.
		ingestScenario{name: "random-kill-twice", kills: 2, seed: seed + 2, files: 10},
	)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runIngestScenario(t, bin, sc)
		})
	}
	t.Run("reindex-keeps-old-chunks-until-commit", func(t *testing.T) {
		t.Parallel()
		runReindexScenario(t, bin)
	})
}

func runIngestScenario(t *testing.T, bin string, sc ingestScenario) {
	st := testkit.NewStack(t)
	port := testkit.FreePort(t)
	env := ingestEnv(st, port)
	first := env
	if sc.crashAt != "" {
		first = ingestEnv(st, port, "YUXI_CRASH_AT", sc.crashAt)
	}
	p := testkit.StartProc(t, bin, first, "/api/system/health")
	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := (&testkit.Client{T: t, Base: p.URL}).Login("admin", "admin-password")
	kbID := c.NewKnowledgeBase("crash-"+sc.name, "ingestion under SIGKILL", nil)
	files := ingestFiles(sc.files)
	items := c.UploadAll(kbID, files)
	// The process may die while answering; the files are committed before
	// any of them is processed, so after the restart they are all there.
	if r, err := c.TryDo("POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": items, "params": smallChunks}); err == nil && r.Status != http.StatusOK {
		t.Fatalf("add documents: %d %s", r.Status, r.Body)
	}

	if sc.crashAt != "" {
		if !p.Exited(20 * time.Second) {
			t.Fatalf("crash point %s was never reached\n%s", sc.crashAt, p.Logs.String())
		}
		t.Logf("crashed at %s with files %s", sc.crashAt, statusSummary(t, pool, kbID))
		checkNothingHalfCommitted(t, pool, kbID)
		p = testkit.StartProc(t, bin, env, "/api/system/health")
	}
	rng := rand.New(rand.NewPCG(sc.seed, 7))
	for k := 0; k < sc.kills; k++ {
		if !killDuringIngestion(t, p, pool, kbID, sc.files, rng) {
			t.Logf("kill %d (seed %d): the batch was already ingested", k+1, sc.seed)
			break
		}
		t.Logf("kill %d (seed %d) with files %s", k+1, sc.seed, statusSummary(t, pool, kbID))
		checkNothingHalfCommitted(t, pool, kbID)
		p = testkit.StartProc(t, bin, env, "/api/system/health")
	}
	c.Base = p.URL

	ids := testkit.WaitKBFilesIndexed(t, pool, kbID, sc.files, 40*time.Second)
	for _, id := range ids {
		if problems := testkit.FileIndexProblems(t, pool, kbID, id); len(problems) > 0 {
			t.Errorf("file %s: %s", id, strings.Join(problems, "; "))
		}
	}
	testkit.WaitKBIndexClean(t, pool, kbID, 15*time.Second)
	checkSearchFindsEachFileOnce(t, c, pool, kbID, ids)
	if t.Failed() {
		t.Logf("process log:\n%s", p.Logs.String())
	}
}

// checkNothingHalfCommitted checks a dead process's leftovers: a file that
// is not indexed yet has no chunk rows and no keyword documents (its index
// commits whole or not at all); vectors written ahead of the commit may be
// there.
func checkNothingHalfCommitted(t *testing.T, pool *pgxpool.Pool, kbID string) {
	t.Helper()
	var chunks, docs, vectors int
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM knowledge_chunks c JOIN knowledge_files f ON f.file_id = c.file_id WHERE f.kb_id = $1 AND f.status <> 'indexed'),
		(SELECT count(*) FROM keyword_docs d JOIN keyword_indexes i ON i.index_no = d.index_no JOIN knowledge_files f
			ON starts_with(d.doc_id, f.file_id || '_') WHERE i.index_id = $1 AND f.status <> 'indexed'),
		(SELECT count(*) FROM vector_items v JOIN knowledge_files f ON f.file_id = v.grp WHERE v.collection = $1 AND f.status <> 'indexed')`,
		kbID).Scan(&chunks, &docs, &vectors); err != nil {
		t.Fatal(err)
	}
	if chunks != 0 || docs != 0 {
		t.Errorf("files not indexed yet already have %d chunk rows and %d keyword documents", chunks, docs)
	}
	t.Logf("vectors written ahead of an uncommitted index: %d", vectors)
}

// stageWeight orders file statuses by how far ingestion got.
var stageWeight = map[string]int{"uploaded": 0, "parsing": 1, "parsed": 2, "indexing": 3, "indexed": 4}

func progress(t *testing.T, pool *pgxpool.Pool, kbID string) int {
	n := 0
	for _, s := range testkit.KBFileStatuses(t, pool, kbID) {
		n += stageWeight[s]
	}
	return n
}

// killDuringIngestion SIGKILLs p once the batch has moved on to a random
// point short of done (a few milliseconds later still), so that the kill
// lands while files are being parsed and indexed. It reports false, killing
// nothing, when nothing is left to interrupt.
func killDuringIngestion(t *testing.T, p *testkit.Proc, pool *pgxpool.Pool, kbID string, files int, rng *rand.Rand) bool {
	t.Helper()
	done := 4 * files
	from := progress(t, pool, kbID)
	if from >= done-1 {
		return false
	}
	target := from + 1 + rng.IntN(done-from-1)
	deadline := time.Now().Add(20 * time.Second)
	for progress(t, pool, kbID) < target {
		if time.Now().After(deadline) {
			t.Fatalf("ingestion stalled before progress %d of %d: %s\n%s", target, done, statusSummary(t, pool, kbID), p.Logs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
	p.Kill()
	return true
}

// statusSummary counts a KB's files by status.
func statusSummary(t *testing.T, pool *pgxpool.Pool, kbID string) string {
	counts := map[string]int{}
	for _, s := range testkit.KBFileStatuses(t, pool, kbID) {
		counts[s]++
	}
	var parts []string
	for _, s := range []string{"uploaded", "parsing", "parsed", "indexing", "indexed", "error_parsing", "error_indexing"} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", s, counts[s]))
		}
	}
	return strings.Join(parts, " ")
}

// checkSearchFindsEachFileOnce queries each file's marker: keyword search
// returns exactly the one chunk holding it, and hybrid search lists that
// chunk once and no chunk content twice.
func checkSearchFindsEachFileOnce(t *testing.T, c *testkit.Client, pool *pgxpool.Pool, kbID string, fileIDs []string) {
	t.Helper()
	for _, id := range fileIDs {
		var name string
		if err := pool.QueryRow(context.Background(), `SELECT filename FROM knowledge_files WHERE file_id = $1`, id).Scan(&name); err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(name, "part-%02d.md", &i); err != nil {
			t.Fatalf("file name %q: %v", name, err)
		}
		m := marker(i)
		kw := query(t, c, kbID, m, "keyword")
		if len(kw) != 1 || kw[0]["file_id"] != id || !strings.Contains(kw[0]["content"].(string), m) {
			t.Errorf("keyword search for %s (file %s): %v", m, id, kw)
		}
		hy := query(t, c, kbID, m, "hybrid")
		seenIDs, seenContent, hits := map[string]bool{}, map[string]bool{}, 0
		for _, r := range hy {
			cid, content := r["id"].(string), r["content"].(string)
			if seenIDs[cid] || seenContent[r["file_id"].(string)+"\x00"+content] {
				t.Errorf("hybrid search for %s returned chunk %s twice", m, cid)
			}
			seenIDs[cid], seenContent[r["file_id"].(string)+"\x00"+content] = true, true
			if strings.Contains(content, m) {
				hits++
				if r["file_id"] != id {
					t.Errorf("hybrid search for %s: marker found in file %v, want %s", m, r["file_id"], id)
				}
			}
		}
		if hits != 1 {
			t.Errorf("hybrid search for %s: the marker chunk appears %d times in %d results", m, hits, len(hy))
		}
	}
}

func query(t *testing.T, c *testkit.Client, kbID, q, mode string) []map[string]any {
	t.Helper()
	var out struct {
		Result []map[string]any `json:"result"`
		Status string           `json:"status"`
	}
	r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query", map[string]any{"query": q, "meta": map[string]any{"search_mode": mode}})
	if r.Status != http.StatusOK {
		t.Fatalf("query %q (%s): %d %s", q, mode, r.Status, r.Body)
	}
	r.Decode(t, &out)
	return out.Result
}

func resultIDs(rs []map[string]any) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r["id"].(string))
	}
	return out
}

// runReindexScenario re-indexes an indexed file with new chunking and kills
// the process before the new index commits: the old chunks stay in place
// and searchable, and once the file is recovered the new set replaces the
// old one whole.
func runReindexScenario(t *testing.T, bin string) {
	st := testkit.NewStack(t)
	port := testkit.FreePort(t)
	// The first index of the file passes index.before_commit once; the
	// re-index is the second time.
	p := testkit.StartProc(t, bin, ingestEnv(st, port, "YUXI_CRASH_AT", "index.before_commit:2"), "/api/system/health")
	c := (&testkit.Client{T: t, Base: p.URL}).Login("admin", "admin-password")
	kbID := c.NewKnowledgeBase("reindex-crash", "atomic replace", nil)
	items := c.UploadAll(kbID, map[string][]byte{"part-07.md": document(7, 40, 20)})
	c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": items, "params": map[string]any{}})

	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	fileID := testkit.WaitKBFilesIndexed(t, pool, kbID, 1, 20*time.Second)[0]
	old := testkit.FileChunkIDs(t, pool, fileID)
	m := marker(7)
	before := query(t, c, kbID, m, "keyword")
	if len(before) != 1 || !slices.Contains(old, before[0]["id"].(string)) {
		t.Fatalf("before the re-index, keyword search for %s: %v (chunks %v)", m, before, old)
	}

	if r, err := c.TryDo("POST", "/api/knowledge/databases/"+kbID+"/documents/index",
		map[string]any{"file_ids": []string{fileID}, "params": smallChunks}); err == nil && r.Status != http.StatusOK {
		t.Fatalf("re-index: %d %s", r.Status, r.Body)
	}
	if !p.Exited(20 * time.Second) {
		t.Fatalf("the re-index never reached index.before_commit\n%s", p.Logs.String())
	}
	// Dead mid-re-index: the database still holds exactly the old set.
	if got := testkit.FileChunkIDs(t, pool, fileID); !slices.Equal(got, old) {
		t.Fatalf("after the crash the file has chunks %v, want the old %v", got, old)
	}
	var orphans int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM vector_items WHERE collection = $1 AND grp = $2 AND NOT (id = ANY($3))`,
		kbID, fileID, old).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	t.Logf("vectors of the uncommitted re-index already in the store: %d (old chunks: %d)", orphans, len(old))

	// A process that will not take the stage over yet (long lease) serves
	// searches: they see the old chunks only, and keyword and hybrid search
	// still find the marker's old chunk.
	p = testkit.StartProc(t, bin, ingestEnv(st, port, "YUXI_FILE_LEASE", "10m", "YUXI_FILE_GRACE", "10m"), "/api/system/health")
	c.Base = p.URL
	for _, mode := range []string{"keyword", "hybrid", "vector"} {
		rs := query(t, c, kbID, m, mode)
		found := false
		for _, r := range rs {
			id := r["id"].(string)
			if !slices.Contains(old, id) {
				t.Errorf("mid-re-index %s search returned %s, which is not one of the committed chunks %v", mode, id, old)
			}
			if strings.Contains(r["content"].(string), m) {
				found = true
			}
		}
		if !found {
			// Vector search included: the uncommitted attempt's vectors are
			// in the store, but the retriever widens past hits without a chunk.
			t.Errorf("mid-re-index %s search for %s does not find the old chunk: %v (old %v, %d uncommitted vectors)",
				mode, m, resultIDs(rs), old, orphans)
		}
	}
	p.Kill()

	// Recovery: the stuck re-index is re-driven and commits the new set.
	p = testkit.StartProc(t, bin, ingestEnv(st, port), "/api/system/health")
	c.Base = p.URL
	deadline := time.Now().Add(30 * time.Second)
	for {
		if testkit.KBFileStatuses(t, pool, kbID)[fileID] == "indexed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-index not recovered after 30s: status %s\n%s", testkit.KBFileStatuses(t, pool, kbID)[fileID], p.Logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	now := testkit.FileChunkIDs(t, pool, fileID)
	if len(now) <= len(old) {
		t.Fatalf("after the re-index the file has %d chunks; the finer chunking should give more than the old %d", len(now), len(old))
	}
	for _, id := range now {
		if slices.Contains(old, id) {
			t.Errorf("old chunk %s survived the re-index", id)
		}
	}
	// The old chunks' vectors are deleted right after the commit that made
	// the file indexed (or by the sweep): wait for that, then check the file.
	testkit.WaitKBIndexClean(t, pool, kbID, 15*time.Second)
	if problems := testkit.FileIndexProblems(t, pool, kbID, fileID); len(problems) > 0 {
		t.Errorf("file after the re-index: %s", strings.Join(problems, "; "))
	}
	checkSearchFindsEachFileOnce(t, c, pool, kbID, []string{fileID})
}
