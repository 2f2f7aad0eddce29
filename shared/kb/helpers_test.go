package kb_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// TestStore runs the tests that need a database against one database
// (pgtest, cloned from the migrated template) shared by this package: each
// works in its own knowledge bases, so they run in parallel. The sweep,
// which scans every KB, has a database of its own (sweep_test.go).
func TestStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		// kb_test.go
		{"Create", testCreate},
		{"Access", testAccess},
		{"UpdateAndDelete", testUpdateAndDelete},
		{"LoadSettings", testLoadSettings},
		// params_test.go
		{"RetrievalOverlayPrecedence", testRetrievalOverlayPrecedence},
		{"CreateValidatesQueryParams", testCreateValidatesQueryParams},
		{"SetRetrieval", testSetRetrieval},
		{"AdditionalParams", testAdditionalParams},
		// files_test.go
		{"FileLifecycle", testFileLifecycle},
		{"FinishParseWithoutAutoIndexEmitsNothing", testFinishParseWithoutAutoIndexEmitsNothing},
		{"ClaimFromEachStatus", testClaimFromEachStatus},
		{"ConcurrentClaimsOneWinner", testConcurrentClaimsOneWinner},
		{"ExpiredLeaseIsReclaimedAndStaleOwnerFenced", testExpiredLeaseIsReclaimedAndStaleOwnerFenced},
		{"FailAndReleaseStage", testFailAndReleaseStage},
		{"RestageFromEachStatus", testRestageFromEachStatus},
		{"RestageStartsAFreshRetryBudget", testRestageStartsAFreshRetryBudget},
		{"AddFilesValidation", testAddFilesValidation},
		{"FoldersListingAndSearch", testFoldersListingAndSearch},
		{"ConcurrentTreeChanges", testConcurrentTreeChanges},
		// index_test.go
		{"CommitIndexReplacesChunks", testCommitIndexReplacesChunks},
		{"CommitIndexIsAtomicForReaders", testCommitIndexIsAtomicForReaders},
		{"EmbeddingCache", testEmbeddingCache},
		{"DeleteFilesAndFlushVectorDeletes", testDeleteFilesAndFlushVectorDeletes},
		{"VectorWritesNeverOutliveTheirChunks", testVectorWritesNeverOutliveTheirChunks},
		// retrieve_test.go
		{"RetrieveEmptyKB", testRetrieveEmptyKB},
		{"RetrieveModes", testRetrieveModes},
		{"RetrieveDropsStaleVectors", testRetrieveDropsStaleVectors},
		{"RetrieveRerank", testRetrieveRerank},
		{"RetrieveErrors", testRetrieveErrors},
		{"RetrieveQueryMany", testRetrieveQueryMany},
		// sources_test.go
		{"Sources", testSources},
		{"ApplyChange", testApplyChange},
		// library_test.go
		{"LibraryUploadAndRegister", testLibraryUploadAndRegister},
		{"LibraryRemoveFilesAndDeleteKB", testLibraryRemoveFilesAndDeleteKB},
		{"LibraryEditMarkdown", testLibraryEditMarkdown},
		{"LibraryImage", testLibraryImage},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, e)
		})
	}
}

// testDim is the embedding dimension of the test KBs (see fixedEmbedder).
const testDim = 3

// env is a test database with the stores shared/kb works with: real
// PostgreSQL, the real keyword index and the embedded vector engine. The
// outbox has no relay: emitted events stay in the outbox table, where the
// tests count them.
type env struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	store *kb.Store
	ob    *outbox.Outbox
	kw    *keyword.Index
	vec   *vector.Postgres
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	vec := vector.NewPostgres(pool, vector.PostgresOptions{})
	t.Cleanup(vec.Close)
	dims := func(spec string) (int, error) {
		if spec == "test:unknown" {
			return 0, failure.Unprocessable("unknown_model", "no model %s", spec)
		}
		return testDim, nil
	}
	return &env{
		ctx:   context.Background(),
		pool:  pool,
		store: kb.NewStore(pool, "test:fixed", dims),
		ob:    &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("kb-test")}},
		kw:    keyword.New(pool, keyword.NewAnalyzer("simple"), keyword.Params{}),
		vec:   vec,
	}
}

// Subjects.
func admin(uid string) access.Subject { return access.Subject{UID: uid, Role: "admin"} }
func user(uid string) access.Subject  { return access.Subject{UID: uid, Role: "user"} }
func superadmin() access.Subject      { return access.Subject{UID: "root", Role: "superadmin"} }
func inDept(s access.Subject, d int64) access.Subject {
	s.DepartmentID = &d
	return s
}

// owner creates the test KBs.
var owner = admin("owner")

func (e *env) createKB(t *testing.T, in kb.CreateInput) kb.KB {
	t.Helper()
	if in.Name == "" {
		in.Name = fmt.Sprintf("kb %s %d", t.Name(), time.Now().UnixNano())
	}
	k, err := e.store.Create(e.ctx, owner, in)
	if err != nil {
		t.Fatalf("create KB: %v", err)
	}
	return k
}

// tx runs fn in an outbox transaction and fails the test on error.
func (e *env) tx(t *testing.T, fn func(tx pgx.Tx, emit outbox.Emit) error) {
	t.Helper()
	if err := e.ob.Tx(e.ctx, e.pool, fn); err != nil {
		t.Fatal(err)
	}
}

// addFile registers one uploaded file named name.
func (e *env) addFile(t *testing.T, kbID, name string) kb.File {
	t.Helper()
	var out []kb.File
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		out, err = e.store.AddFilesTx(e.ctx, tx, emit, kbID, []kb.NewFile{{Filename: name, ObjectKey: kbID + "/upload/" + name,
			ContentHash: hashOf(kbID + name), Size: 10, CreatedBy: owner.UID, Processing: kb.Processing{AutoIndex: true}}})
		return err
	})
	return out[0]
}

func (e *env) load(t *testing.T, fileID string) kb.File {
	t.Helper()
	f, err := e.store.LoadFile(e.ctx, fileID)
	if err != nil {
		t.Fatalf("load file %s: %v", fileID, err)
	}
	return f
}

// parse takes an uploaded file through a successful parse stage.
func (e *env) parse(t *testing.T, fileID string) kb.File {
	t.Helper()
	f, err := e.store.ClaimParse(e.ctx, fileID, time.Minute)
	if err != nil {
		t.Fatalf("claim parse %s: %v", fileID, err)
	}
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		return e.store.FinishParseTx(e.ctx, tx, emit, f, "parsed/"+fileID+".md", nil)
	})
	return e.load(t, fileID)
}

// chunksOf builds indexed chunks of fileID with content-derived ids, as kb-index does.
func chunksOf(fileID string, contents ...string) []kb.IndexedChunk {
	cs := make([]chunk.Chunk, len(contents))
	pos := 0
	for i, c := range contents {
		cs[i] = chunk.Chunk{Index: i, Content: c, TokenCount: chunk.CountTokens(c), StartChar: pos, EndChar: pos + len(c),
			ContentHash: hashOf(c)}
		pos += len(c) + 1
	}
	ids := chunk.ChunkIDs(fileID, cs)
	out := make([]kb.IndexedChunk, len(cs))
	for i := range cs {
		out[i] = kb.IndexedChunk{ID: ids[i], Chunk: cs[i]}
	}
	return out
}

// index claims a parsed file's indexing stage and commits contents as its
// chunks; it returns the chunks and the ids CommitIndex reported removed.
func (e *env) index(t *testing.T, fileID string, contents ...string) ([]kb.IndexedChunk, []string) {
	t.Helper()
	f, err := e.store.ClaimIndex(e.ctx, fileID, time.Minute)
	if err != nil {
		t.Fatalf("claim index %s: %v", fileID, err)
	}
	cs := chunksOf(fileID, contents...)
	var removed []string
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		removed, err = e.store.CommitIndexTx(e.ctx, tx, e.kw, f, cs)
		return err
	})
	return cs, removed
}

// ingest adds a file and takes it to indexed with one chunk per content.
func (e *env) ingest(t *testing.T, kbID, name string, contents ...string) (kb.File, []kb.IndexedChunk) {
	t.Helper()
	f := e.addFile(t, kbID, name)
	e.parse(t, f.FileID)
	cs, _ := e.index(t, f.FileID, contents...)
	return e.load(t, f.FileID), cs
}

// restage sends a settled file back to parsed (to index it again).
func (e *env) restage(t *testing.T, kbID, fileID, to string) map[string]any {
	t.Helper()
	var res []map[string]any
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		res, err = e.store.RestageTx(e.ctx, tx, emit, kbID, []string{fileID}, to, nil)
		return err
	})
	return res[0]
}

// exec runs a statement and fails the test on error.
func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.pool.Exec(e.ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// expireStage makes fileID's stage (and last update) an hour old, as if its
// worker had died long ago.
func (e *env) expireStage(t *testing.T, fileID string) {
	t.Helper()
	e.exec(t, `UPDATE knowledge_files SET stage_started_at = now() - interval '1 hour',
		updated_at = now() - interval '1 hour' WHERE file_id = $1`, fileID)
}

// events lists the types of the outbox events written about fileID, oldest first.
func (e *env) events(t *testing.T, fileID string) []string {
	t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT type FROM outbox WHERE data->>'file_id' = $1 ORDER BY id`, fileID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// wantCode fails unless err is a coded failure of kind and code.
func wantCode(t *testing.T, err error, kind failure.Kind, code string) {
	t.Helper()
	fe, ok := failure.As(err)
	if !ok {
		t.Fatalf("error = %v, want coded error %s (kind %d)", err, code, kind)
	}
	if fe.Kind != kind || fe.Code != code {
		t.Fatalf("error = %v (kind %d), want %s (kind %d)", err, fe.Kind, code, kind)
	}
}

// jsonEqual reports whether got and want hold the same JSON value.
func jsonEqual(got []byte, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}
