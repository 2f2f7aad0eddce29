package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
	"github.com/yuxi-serverless/yuxi/shared/docparse/pdf"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/retrievaleval"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 7: ingestion — PDF extraction against pdftotext, chunk commits
// against psql \copy, documents end to end through the local runner, and
// the intake's latency while it ingests.
const (
	pdfFiles, pdfPages = 4, 25 // generated dense two-column documents
	pdfRounds          = 3     // alternating: ours, pdftotext, …
	pdfTarget          = 0.3   // pages/s ≥ 0.3× pdftotext (pure Go)

	copyRounds = 3   // each: the commit without and with the keyword index, and psql \copy, in rotating order
	copyTarget = 0.8 // rows/s ≥ 0.8× psql \copy
	// with the keyword index (analysis, term vectors, postings) ≥ 0.5× psql \copy
	copyKeywordTarget = 0.5

	e2eDocs       = 600 // files uploaded: Markdown, text and HTML in turn, then e2ePDFs PDFs
	e2ePDFs       = 6
	e2eUploaders  = 8 // concurrent uploads
	e2eTimeout    = 5 * time.Minute
	intakeIdle    = 200 // idle samples of the light request
	intakeEvery   = 10 * time.Millisecond
	intakeTarget  = 1.5 // while ingesting ≤ 1.5× idle
	intakeRequest = "/api/chat/threads"
)

func figIngest(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[7] ingestion: PDF extraction, chunk commits, documents end to end, intake latency while ingesting", "")
	if err := figPDF(ctx, e, r); err != nil {
		return fmt.Errorf("PDF extraction: %w", err)
	}
	ds, err := e.dataset("scifact")
	if err != nil {
		return err
	}
	if err := figCommit(ctx, e, r, ds); err != nil {
		return fmt.Errorf("chunk commit: %w", err)
	}
	if err := figEndToEnd(ctx, e, r, ds); err != nil {
		return fmt.Errorf("end to end: %w", err)
	}
	return nil
}

// figPDF: pages/s of the pure-Go extractor (pdf.MeasurePagesPerSecond)
// against `pdftotext -q f.pdf /dev/null` on the same files.
func figPDF(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Detail("(a) PDF text: %d generated %d-page two-column documents (docparsetest.DensePDF, ~900 words a page); "+
		"pdf.MeasurePagesPerSecond (one after the other, in process) against `pdftotext -q f.pdf /dev/null` per file "+
		"(Debian poppler-utils, process start included), %d rounds, alternating, after one untimed run of each", pdfFiles, pdfPages, pdfRounds)
	files := make([][]byte, pdfFiles)
	dir, err := os.MkdirTemp("", "yuxi-bench-pdf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	paths := make([]string, pdfFiles)
	for i := range files {
		files[i] = docparsetest.DensePDF(pdfPages, uint64(i+1))
		paths[i] = filepath.Join(dir, fmt.Sprintf("dense-%d.pdf", i))
		if err := os.WriteFile(paths[i], files[i], 0o644); err != nil {
			return err
		}
	}
	pages := pdfFiles * pdfPages
	bin, lookErr := exec.LookPath("pdftotext")
	ours := func() (time.Duration, error) {
		pps, err := pdf.MeasurePagesPerSecond(ctx, files)
		if err != nil || pps <= 0 {
			return 0, fmt.Errorf("measure pages/s: %v (%v pages/s)", err, pps)
		}
		return time.Duration(float64(pages) / pps * float64(time.Second)), nil
	}
	theirs := func() (time.Duration, error) {
		t0 := time.Now()
		for _, p := range paths {
			if out, err := exec.CommandContext(ctx, bin, "-q", p, os.DevNull).CombinedOutput(); err != nil {
				return 0, fmt.Errorf("pdftotext %s: %v: %s", filepath.Base(p), err, out)
			}
		}
		return time.Since(t0), nil
	}
	e.Progress("figure 7: PDF extraction, %d rounds of %d pages", pdfRounds, pages)
	var ourTime, theirTime time.Duration
	for round := -1; round < pdfRounds; round++ { // round -1 warms both up, untimed
		order := []bool{round%2 == 0, round%2 != 0} // true: ours
		for _, isOurs := range order {
			if !isOurs && lookErr != nil {
				continue
			}
			var d time.Duration
			var err error
			if isOurs {
				d, err = ours()
			} else {
				d, err = theirs()
			}
			if err != nil {
				return err
			}
			if round >= 0 && isOurs {
				ourTime += d
			} else if round >= 0 {
				theirTime += d
			}
		}
	}
	oursPPS := float64(pages*pdfRounds) / ourTime.Seconds()
	if lookErr != nil {
		r.Line("pdf_pages_per_s", fmt.Sprintf("%.0f/s", oursPPS), "pdftotext not installed: no ratio", "", false)
		return nil
	}
	theirsPPS := float64(pages*pdfRounds) / theirTime.Seconds()
	rr := oursPPS / theirsPPS
	r.Line("pdf_pages_per_s", fmt.Sprintf("%.0f/s", oursPPS), fmt.Sprintf("%s pdftotext %.0f/s", benchkit.X(rr), theirsPPS),
		fmt.Sprintf("≥ %.1f× pdftotext", pdfTarget), rr >= pdfTarget)
	if v, err := exec.CommandContext(ctx, bin, "-v").CombinedOutput(); err == nil {
		first, _, _ := strings.Cut(string(v), "\n")
		r.Detail("%s; files of %.0f kB", strings.TrimSpace(first), float64(len(files[0]))/1024)
	}
	return nil
}

// noKeyword is a keyword writer that writes nothing: the commit of chunk
// rows alone, for comparing with a bare \copy of the same rows.
type noKeyword struct{}

func (noKeyword) Apply(context.Context, pgx.Tx, string, []string, []keyword.Doc) error { return nil }

var chunkColumns = []string{"chunk_id", "kb_id", "file_id", "chunk_index", "content", "content_hash", "token_count",
	"start_char_pos", "end_char_pos", "metadata"}

// figCommit: chunk rows/s of kb.Store.CommitIndexTx (one file's chunks, COPY into
// knowledge_chunks) against psql \copy of the same rows into a table
// created LIKE knowledge_chunks, on a database with the server's settings.
func figCommit(ctx context.Context, e *env, r *benchkit.Report, ds *retrievaleval.Dataset) error {
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	blobDir, err := os.MkdirTemp("", "yuxi-bench-blob-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(blobDir)
	app, err := e.openKnowledgeApp(ctx, db, prefix, blobDir)
	if err != nil {
		return err
	}
	defer app.Close()
	pool := app.Pool

	// One file holding every SciFact abstract, chunked as kb-index chunks it.
	var md strings.Builder
	for _, d := range ds.Corpus {
		fmt.Fprintf(&md, "# %s\n\n%s\n\n", d.Title, d.Text)
	}
	chunks, err := chunk.Split(ctx, "general", md.String(), chunk.DefaultConfig(), chunk.Options{Filename: "scifact.md"})
	if err != nil {
		return err
	}
	bytesPerRow := md.Len() / len(chunks)
	r.Detail("(b) chunk rows: one file of %d chunks (all of SciFact as one Markdown file, default chunking, ~%d bytes a row) per run; "+
		"kb.Store.CommitIndexTx in its own transaction (COPY into knowledge_chunks, the file and KB rows), once with a keyword writer that "+
		"writes nothing (the rows alone) and once with the keyword index (BM25 postings too); floor: `psql -c '\\copy bench_copy FROM file'` "+
		"of the same rows, bench_copy created LIKE knowledge_chunks INCLUDING ALL (no foreign keys), psql's start included; "+
		"%d rounds, order rotating; a database with the server's commit settings", len(chunks), bytesPerRow, copyRounds)
	k, err := app.Knowledge.KBs.Create(ctx, access.Subject{UID: "bench", Role: "superadmin"}, kb.CreateInput{Name: "bench-commit"})
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_copy (LIKE knowledge_chunks INCLUDING ALL)`); err != nil {
		return err
	}
	psql, psqlErr := exec.LookPath("psql")
	dir, err := os.MkdirTemp("", "yuxi-bench-copy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// claimed registers a file and takes it to the indexing stage (untimed).
	claimed := func(n int) (kb.File, error) {
		noEmit := func(...outbox.Pending) error { return nil }
		var f kb.File
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			fs, err := app.Knowledge.KBs.AddFilesTx(ctx, tx, noEmit, k.KBID, []kb.NewFile{{Filename: fmt.Sprintf("scifact-%d.md", n),
				ObjectKey: kb.UploadKey(k.KBID, "scifact.md", time.Unix(0, int64(n))), Size: int64(md.Len()), CreatedBy: "bench"}})
			if err == nil {
				f = fs[0]
			}
			return err
		})
		if err != nil {
			return f, err
		}
		if f, err = app.Knowledge.KBs.ClaimParse(ctx, f.FileID, time.Hour); err != nil {
			return f, err
		}
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return app.Knowledge.KBs.FinishParseTx(ctx, tx, noEmit, f, kb.MarkdownKey(k.KBID, f.FileID), nil)
		})
		if err != nil {
			return f, err
		}
		return app.Knowledge.KBs.ClaimIndex(ctx, f.FileID, time.Hour)
	}
	var analysis time.Duration // keyword analysis ahead of the commits (kb.PrepareKeyword), untimed in them
	commit := func(n int, kw kb.KeywordWriter) (time.Duration, error) {
		f, err := claimed(n)
		if err != nil {
			return 0, err
		}
		ids := chunk.ChunkIDs(f.FileID, chunks)
		idx := make([]kb.IndexedChunk, len(chunks))
		for i, c := range chunks {
			idx[i] = kb.IndexedChunk{ID: ids[i], Chunk: c}
		}
		if _, ok := kw.(kb.KeywordPreparer); ok { // as kb-index does while the chunks are embedded
			t0 := time.Now()
			kw = kb.PrepareKeyword(kw, idx, nil)
			analysis += time.Since(t0)
		}
		t0 := time.Now()
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := app.Knowledge.KBs.CommitIndexTx(ctx, tx, kw, f, idx)
			return err
		})
		return time.Since(t0), err
	}
	copyFloor := func(n int) (time.Duration, error) {
		fileID := "file_" + benchkit.RandomHex(12) // the rows another file would have
		path := filepath.Join(dir, fmt.Sprintf("rows-%d.txt", n))
		if err := writeCopyRows(path, k.KBID, fileID, chunks); err != nil {
			return 0, err
		}
		cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db.URL,
			"-c", fmt.Sprintf(`\copy bench_copy (%s) FROM '%s'`, strings.Join(chunkColumns, ", "), path))
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("psql \\copy: %v: %s", err, out)
		}
		return d, nil
	}
	e.Progress("figure 7: chunk commits, %d rounds of %d rows", copyRounds, len(chunks))
	var rowsOnly, withKeyword, floor time.Duration
	for round := range copyRounds {
		ops := []func() error{
			func() error { d, err := commit(3*round, noKeyword{}); rowsOnly += d; return err },
			func() error { d, err := commit(3*round+1, app.Knowledge.Keyword); withKeyword += d; return err },
			func() error {
				if psqlErr != nil {
					return nil
				}
				d, err := copyFloor(round)
				floor += d
				return err
			},
		}
		for i := range ops {
			if err := ops[(i+round)%len(ops)](); err != nil {
				return err
			}
		}
	}
	var copied int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM bench_copy`).Scan(&copied); err != nil {
		return err
	}
	rows := float64(copyRounds * len(chunks))
	ours, full := rows/rowsOnly.Seconds(), rows/withKeyword.Seconds()
	if psqlErr != nil {
		r.Line("chunk_commit_rows_per_s", fmt.Sprintf("%.0f/s", ours), "psql not installed: no ratio", "", false)
		r.Detail("with the keyword index: %.0f rows/s", full)
		return nil
	}
	if copied != copyRounds*len(chunks) {
		return fmt.Errorf("bench_copy holds %d rows after %d \\copy runs of %d", copied, copyRounds, len(chunks))
	}
	theirs := rows / floor.Seconds()
	r.Line("chunk_commit_rows_per_s", fmt.Sprintf("%.0f/s", ours), fmt.Sprintf("%s psql \\copy %.0f/s", benchkit.X(ours/theirs), theirs),
		fmt.Sprintf("≥ %.1f× psql \\copy", copyTarget), ours/theirs >= copyTarget)
	r.Line("chunk_commit_with_keyword_rows_per_s", fmt.Sprintf("%.0f/s", full), fmt.Sprintf("%s psql \\copy", benchkit.X(full/theirs)),
		fmt.Sprintf("≥ %.1f× psql \\copy", copyKeywordTarget), full/theirs >= copyKeywordTarget)
	r.Detail("the commit with the keyword index also writes every chunk's term vector and the BM25 postings (one block per "+
		"distinct term of the file), analysed before the transaction by kb.PrepareKeyword as kb-index does while the chunks are "+
		"embedded: %.0f ms a file on all cores, untimed above; counting it, %.0f rows/s, %s psql \\copy",
		analysis.Seconds()*1000/copyRounds, rows/(withKeyword+analysis).Seconds(), benchkit.X(rows/(withKeyword+analysis).Seconds()/theirs))
	return nil
}

// writeCopyRows writes chunks as rows of fileID in COPY's text format, as
// kb.Store.CommitIndexTx would insert them.
func writeCopyRows(path, kbID, fileID string, chunks []chunk.Chunk) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	ids := chunk.ChunkIDs(fileID, chunks)
	esc := strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)
	for i, c := range chunks {
		headings := c.Headings
		if headings == nil {
			headings = []string{}
		}
		meta, _ := json.Marshal(map[string][]string{"headings": headings})
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", ids[i], kbID, fileID, c.Index, esc.Replace(c.Content),
			c.ContentHash, c.TokenCount, c.StartChar, c.EndChar, esc.Replace(string(meta)))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ingestDoc is a file uploaded in the end-to-end run.
type ingestDoc struct {
	name string
	data []byte
}

// e2eCorpus is e2eDocs files: SciFact abstracts as Markdown, plain text
// and HTML in turn, and e2ePDFs three-page dense PDFs.
func e2eCorpus(ds *retrievaleval.Dataset) []ingestDoc {
	var out []ingestDoc
	for i, d := range ds.Corpus[:e2eDocs-e2ePDFs] {
		switch i % 3 {
		case 0:
			out = append(out, ingestDoc{fmt.Sprintf("doc-%03d.md", i), []byte("# " + d.Title + "\n\n" + d.Text + "\n")})
		case 1:
			out = append(out, ingestDoc{fmt.Sprintf("doc-%03d.txt", i), []byte(d.Title + "\n\n" + d.Text + "\n")})
		default:
			t := html.EscapeString(d.Title)
			out = append(out, ingestDoc{fmt.Sprintf("doc-%03d.html", i), []byte("<!DOCTYPE html><html><head><title>" + t +
				"</title></head><body><h1>" + t + "</h1><p>" + html.EscapeString(d.Text) + "</p></body></html>\n")})
		}
	}
	for i := range e2ePDFs {
		out = append(out, ingestDoc{fmt.Sprintf("report-%d.pdf", i), docparsetest.DensePDF(3, uint64(100+i))})
	}
	return out
}

// figEndToEnd: the local runner (every function in one process) ingests
// uploaded files; per-stage times come from the KB's status notices; the
// intake's latency on a light request is sampled idle and while ingesting.
func figEndToEnd(ctx context.Context, e *env, r *benchkit.Report, ds *retrievaleval.Dataset) error {
	docs := e2eCorpus(ds)
	r.Detail("(c, d) end to end: the local runner (./infra/local/cmd/yuxi-server: every function in one process, the in-process bus, default "+
		"settings) on a bench database; %d files (Markdown, text and HTML SciFact abstracts in turn, %d three-page dense PDFs) "+
		"uploaded over HTTP (POST /api/knowledge/files/upload, %d at once), then added in one POST …/documents; stage times "+
		"per file from the KB's status notices (GET …/events, time of receipt): queue wait (added → parsing), parse, "+
		"wait (parsed → indexing), index; intake: GET %s every %s, idle before the uploads and while the files are processed",
		len(docs), e2ePDFs, e2eUploaders, intakeRequest, intakeEvery)
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	blobDir, err := os.MkdirTemp("", "yuxi-bench-blob-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(blobDir)
	penv := e.platformEnv(db, prefix)
	penv["PORT"] = "0"
	penv["YUXI_BLOB_URI"] = blobDir
	p, err := startProc(e.bins[localRunner], penv, time.Minute, nil)
	if err != nil {
		return err
	}
	defer p.stop()
	port, err := p.Port()
	if err != nil {
		return err
	}
	a := newAPI(fmt.Sprintf("http://127.0.0.1:%d", port), 2*e2eUploaders)
	defer a.hc.CloseIdleConnections()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := a.call(ctx, "POST", "/api/auth/initialize", map[string]string{"uid": "bench", "password": "bench-password"}, &tok); err != nil {
		return err
	}
	a.token = tok.AccessToken
	var created struct {
		KBID string `json:"kb_id"`
	}
	if err := a.call(ctx, "POST", "/api/knowledge/databases", map[string]any{"database_name": "bench-ingest"}, &created); err != nil {
		return err
	}
	probe := newAPI(a.base, 1) // the intake samples, on a connection of their own
	probe.token = a.token
	defer probe.hc.CloseIdleConnections()

	e.Progress("figure 7: intake idle, %d requests", intakeIdle)
	idle := make(benchkit.Samples, 0, intakeIdle)
	for range intakeIdle {
		d, err := probe.timed(ctx, intakeRequest)
		if err != nil {
			return err
		}
		idle = append(idle, d)
		time.Sleep(intakeEvery)
	}

	e.Progress("figure 7: uploading %d files", len(docs))
	items := make([]string, len(docs))
	hashes := map[string]string{}
	var mu sync.Mutex
	t0 := time.Now()
	per := (len(docs) + e2eUploaders - 1) / e2eUploaders
	if _, err := benchkit.Concurrently(ctx, e2eUploaders, per, func(ctx context.Context, w, i int) (time.Duration, error) {
		n := w*per + i
		if n >= len(docs) {
			return 0, nil
		}
		path, hash, err := a.upload(ctx, created.KBID, docs[n].name, docs[n].data)
		items[n] = path
		mu.Lock()
		hashes[path] = hash
		mu.Unlock()
		return 0, err
	}); err != nil {
		return err
	}
	uploadTook := time.Since(t0)

	watch, err := watchKB(ctx, a, created.KBID)
	if err != nil {
		return err
	}
	defer watch.close()
	pool, err := postgres.Open(ctx, db.URL, 1)
	if err != nil {
		return err
	}
	defer pool.Close()

	e.Progress("figure 7: ingesting %d files through the local runner", len(docs))
	sampler := startSampler(ctx, probe)
	added := time.Now()
	var out struct {
		Items []struct {
			FileID string `json:"file_id"`
		} `json:"items"`
	}
	if err := a.call(ctx, "POST", "/api/knowledge/databases/"+created.KBID+"/documents",
		map[string]any{"items": items, "params": map[string]any{"content_hashes": hashes}}, &out); err != nil {
		_, _ = sampler.stop()
		return err
	}
	polled, err := waitSettled(ctx, pool, created.KBID, len(docs))
	during, serr := sampler.stop()
	if err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	if len(out.Items) != len(docs) {
		return fmt.Errorf("POST …/documents added %d files of %d", len(out.Items), len(docs))
	}

	var indexed, failed int
	var firstErr *string
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'indexed'), count(*) FILTER (WHERE status <> 'indexed'),
		(SELECT filename || ' ' || status || ': ' || coalesce(error_message, '') FROM knowledge_files
		 WHERE kb_id = $1 AND status <> 'indexed' AND NOT is_folder LIMIT 1)
		FROM knowledge_files WHERE kb_id = $1 AND NOT is_folder`, created.KBID).Scan(&indexed, &failed, &firstErr); err != nil {
		return err
	}
	st := watch.stages(out.Items, added)
	end := polled
	if st.complete == len(docs) {
		end = st.last // every file's last notice arrived: more precise than the poll
	}
	took := end.Sub(added)
	docsPS := float64(len(docs)) / took.Seconds()
	r.Line("ingest_e2e_docs_per_s", fmt.Sprintf("%.0f/s", docsPS),
		fmt.Sprintf("no floor: %d files added → every file settled in %s; %d indexed, %d failed", len(docs), took.Round(time.Millisecond), indexed, failed), "", false)
	if firstErr != nil {
		r.Detail("first file not indexed: %s", *firstErr)
	}
	r.Detail("per file, p50 / p90 over the %d files with all four notices: queue wait %s / %s, parse %s / %s, wait %s / %s, index %s / %s; "+
		"upload %d files over HTTP in %s (%.0f files/s)", st.complete,
		benchkit.Ms(st.queue.P50()), benchkit.Ms(st.queue.Pct(90)), benchkit.Ms(st.parse.P50()), benchkit.Ms(st.parse.Pct(90)), benchkit.Ms(st.wait.P50()), benchkit.Ms(st.wait.Pct(90)),
		benchkit.Ms(st.index.P50()), benchkit.Ms(st.index.Pct(90)), len(docs), uploadTook.Round(time.Millisecond), float64(len(docs))/uploadTook.Seconds())
	if err := watch.err(); err != nil {
		r.Detail("the event stream failed: %v", err)
	}

	i50, i99 := idle.P50(), idle.P99()
	for _, pc := range []struct {
		name      string
		got, base time.Duration
		idleName  string
	}{{"p50", during.P50(), i50, "p50"}, {"p99", during.P99(), i99, "p99"}} {
		rr := benchkit.DurRatio(pc.got, pc.base)
		r.Line("intake_while_ingesting_"+pc.name, benchkit.Ms(pc.got), fmt.Sprintf("%s idle %s %s", benchkit.X(rr), pc.idleName, benchkit.Ms(pc.base)),
			fmt.Sprintf("≤ %.1f× idle", intakeTarget), rr <= intakeTarget)
	}
	r.Detail("GET %s: %d samples idle, %d while ingesting", intakeRequest, len(idle), len(during))
	return nil
}

// upload posts one file to the KB and returns its upload path and hash.
func (a *api) upload(ctx context.Context, kbID, name string, data []byte) (string, string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		return "", "", err
	}
	_, _ = fw.Write(data)
	if err := mw.Close(); err != nil {
		return "", "", err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", a.base+"/api/knowledge/files/upload?kb_id="+url.QueryEscape(kbID), &buf)
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.hc.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("upload %s: %w", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("upload %s: status %d: %s", name, resp.StatusCode, b)
	}
	var out struct {
		FilePath    string `json:"file_path"`
		ContentHash string `json:"content_hash"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.FilePath == "" {
		return "", "", fmt.Errorf("upload %s: answer %s", name, b)
	}
	return out.FilePath, out.ContentHash, nil
}

// timed sends GET path and returns how long the answer took.
func (a *api) timed(ctx context.Context, path string) (time.Duration, error) {
	t0 := time.Now()
	err := a.call(ctx, "GET", path, nil, nil)
	return time.Since(t0), err
}

// sampler sends the intake's light request every intakeEvery until stopped.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	lat    benchkit.Samples
	err    error
}

func startSampler(ctx context.Context, a *api) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			d, err := a.timed(ctx, intakeRequest)
			if err != nil {
				if ctx.Err() == nil {
					s.err = err
				}
				return
			}
			s.lat = append(s.lat, d)
			select {
			case <-ctx.Done():
			case <-time.After(intakeEvery):
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the latencies.
func (s *sampler) stop() (benchkit.Samples, error) {
	s.cancel()
	<-s.done
	return s.lat, s.err
}

// waitSettled polls the KB's files until n of them are indexed or failed
// and returns when that was seen.
func waitSettled(ctx context.Context, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, kbID string, n int) (time.Time, error) {
	deadline := time.Now().Add(e2eTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var settled int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_files WHERE kb_id = $1 AND NOT is_folder
			AND status IN ('indexed', 'error_parsing', 'error_indexing')`, kbID).Scan(&settled); err != nil {
			return time.Time{}, err
		}
		if settled >= n {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d files settled after %s", settled, n, e2eTimeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// kbWatch follows a KB's status notices (GET …/{kb_id}/events) and keeps
// when each (file, status) notice was read.
type kbWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   map[string]map[string]time.Time
	failed error
}

func watchKB(ctx context.Context, a *api, kbID string) (*kbWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &kbWatch{cancel: cancel, done: make(chan struct{}), seen: map[string]map[string]time.Time{}}
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+"/api/knowledge/databases/"+kbID+"/events", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "text/event-stream")
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("events of KB %s: status %d: %s", kbID, resp.StatusCode, b)
	}
	go func() {
		defer close(w.done)
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		event := ""
		for {
			line, err := br.ReadSlice('\n')
			at := time.Now()
			if err != nil {
				if ctx.Err() == nil {
					w.mu.Lock()
					w.failed = err
					w.mu.Unlock()
				}
				return
			}
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case bytes.HasPrefix(line, []byte("event: ")):
				event = string(line[len("event: "):])
			case bytes.HasPrefix(line, []byte("data: ")) && event == "file_status":
				var n struct {
					FileID string `json:"file_id"`
					Status string `json:"status"`
				}
				if json.Unmarshal(line[len("data: "):], &n) == nil {
					w.mu.Lock()
					if w.seen[n.FileID] == nil {
						w.seen[n.FileID] = map[string]time.Time{}
					}
					if _, dup := w.seen[n.FileID][n.Status]; !dup {
						w.seen[n.FileID][n.Status] = at
					}
					w.mu.Unlock()
				}
			case len(line) == 0:
				event = ""
			}
		}
	}()
	return w, nil
}

func (w *kbWatch) close() {
	w.cancel()
	<-w.done
}

func (w *kbWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// stageTimes are the per-file stage durations of the files whose four
// notices all arrived.
type stageTimes struct {
	queue, parse, wait, index benchkit.Samples
	complete                  int
	last                      time.Time // the latest notice of a complete file
}

func (w *kbWatch) stages(files []struct {
	FileID string `json:"file_id"`
}, added time.Time) stageTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	var st stageTimes
	order := []string{kb.StatusParsing, kb.StatusParsed, kb.StatusIndexing, kb.StatusIndexed}
	for _, f := range files {
		seen := w.seen[f.FileID]
		ts := make([]time.Time, 0, len(order))
		for _, s := range order {
			if t, ok := seen[s]; ok {
				ts = append(ts, t)
			}
		}
		if len(ts) != len(order) {
			continue
		}
		st.complete++
		st.queue = append(st.queue, ts[0].Sub(added))
		st.parse = append(st.parse, ts[1].Sub(ts[0]))
		st.wait = append(st.wait, ts[2].Sub(ts[1]))
		st.index = append(st.index, ts[3].Sub(ts[2]))
		if ts[3].After(st.last) {
			st.last = ts[3]
		}
	}
	return st
}
