package kb_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// TestPurgeDeletedKBs: deleting a KB records its vector collection and
// objects as owed in the same transaction, so a process that dies right after
// the commit leaves them to the sweep, not orphaned; a failing purge keeps the
// row with its error; concurrent purgers do each KB once; other KBs keep
// theirs. (Its own database: PurgeDeleted("") scans every KB.)
func TestPurgeDeletedKBs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	objs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// seed gives a KB a collection with one vector and two objects.
	seed := func(kbID string) {
		if err := e.vec.EnsureCollection(e.ctx, kbID, testDim); err != nil {
			t.Fatal(err)
		}
		if err := e.vec.Upsert(e.ctx, kbID, []vector.Item{{ID: kbID + "_c", Group: "g", Vector: []float32{1, 0, 0}}}); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"upload/a.md", "files/f/content.md"} {
			if _, err := objs.Put(e.ctx, kb.ObjectPrefix(kbID)+k, strings.NewReader("x"), 1, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	hasCollection := func(kbID string) bool {
		_, err := e.vec.Search(e.ctx, kbID, []float32{1, 0, 0}, 1, nil)
		if err != nil && !errors.Is(err, vector.ErrCollectionNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	objectCount := func(kbID string) int {
		l, err := objs.List(e.ctx, kb.ObjectPrefix(kbID))
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	owed := func(kbID string) (n, attempts int, lastErr *string) {
		if err := e.pool.QueryRow(e.ctx, `SELECT count(*), coalesce(max(attempts), 0), max(last_error)
			FROM knowledge_base_purges WHERE kb_id = $1`, kbID).Scan(&n, &attempts, &lastErr); err != nil {
			t.Fatal(err)
		}
		return
	}
	del := func(kbID string) {
		e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
			_, err := e.store.DeleteTx(e.ctx, tx, owner, kbID)
			return err
		})
	}

	gone, kept := e.createKB(t, kb.CreateInput{}), e.createKB(t, kb.CreateInput{})
	seed(gone.KBID)
	seed(kept.KBID)
	// The process dies after the commit: the KB's rows are gone, its
	// collection and objects are owed.
	del(gone.KBID)
	if n, _, _ := owed(gone.KBID); n != 1 || !hasCollection(gone.KBID) || objectCount(gone.KBID) != 2 {
		t.Fatalf("after the delete: owed %d, collection %v, objects %d", n, hasCollection(gone.KBID), objectCount(gone.KBID))
	}

	// The object store fails: the row stays, with the error.
	n, err := e.store.PurgeDeleted(e.ctx, e.vec, failingRemover{objs}, "")
	if err == nil || n != 0 {
		t.Fatalf("purge with a failing store = %d, %v", n, err)
	}
	if c, attempts, lastErr := owed(gone.KBID); c != 1 || attempts != 1 || lastErr == nil || !strings.Contains(*lastErr, "disk on fire") {
		t.Fatalf("failed purge recorded %d rows, %d attempts, %v", c, attempts, lastErr)
	}

	// The sweep's purgers, two at once: the KB is purged once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 2 {
		wg.Go(func() {
			n, err := e.store.PurgeDeleted(context.Background(), e.vec, objs, "")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != 1 {
		t.Errorf("two purgers purged %d KBs, want 1", total)
	}
	if c, _, _ := owed(gone.KBID); c != 0 || hasCollection(gone.KBID) || objectCount(gone.KBID) != 0 {
		t.Errorf("after the purge: owed %d, collection %v, objects %d", c, hasCollection(gone.KBID), objectCount(gone.KBID))
	}
	if !hasCollection(kept.KBID) || objectCount(kept.KBID) != 2 {
		t.Errorf("the other KB lost its collection (%v) or objects (%d)", hasCollection(kept.KBID), objectCount(kept.KBID))
	}
	if n, err := e.store.PurgeDeleted(e.ctx, e.vec, objs, ""); n != 0 || err != nil {
		t.Errorf("nothing owed, purge = %d, %v", n, err)
	}

	// The route's purge names its KB and leaves others owed to the sweep.
	del(kept.KBID)
	other := e.createKB(t, kb.CreateInput{})
	seed(other.KBID)
	del(other.KBID)
	if n, err := e.store.PurgeDeleted(e.ctx, e.vec, objs, kept.KBID); n != 1 || err != nil {
		t.Fatalf("purge of %s = %d, %v", kept.KBID, n, err)
	}
	if c, _, _ := owed(other.KBID); c != 1 || objectCount(other.KBID) != 2 {
		t.Errorf("purging one KB touched another: owed %d, objects %d", c, objectCount(other.KBID))
	}
}

// TestOwePurgeIfGone: a stage that lost its file owes a purge only when its
// KB is gone — then what it wrote after the KB's purge goes too.
func TestOwePurgeIfGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	objs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := e.createKB(t, kb.CreateInput{})
	if owed, err := e.store.OwePurgeIfGone(e.ctx, k.KBID); owed || err != nil {
		t.Fatalf("a live KB: owed %v, %v", owed, err)
	}
	e.tx(t, func(tx pgx.Tx, _ outbox.Emit) error {
		_, err := e.store.DeleteTx(e.ctx, tx, owner, k.KBID)
		return err
	})
	if n, err := e.store.PurgeDeleted(e.ctx, e.vec, objs, k.KBID); n != 1 || err != nil {
		t.Fatalf("purge = %d, %v", n, err)
	}
	// An indexing stage still running writes a collection and an object.
	if err := e.vec.EnsureCollection(e.ctx, k.KBID, testDim); err != nil {
		t.Fatal(err)
	}
	if _, err := objs.Put(e.ctx, kb.ObjectPrefix(k.KBID)+"files/f/content.md", strings.NewReader("late"), 4, ""); err != nil {
		t.Fatal(err)
	}
	if owed, err := e.store.OwePurgeIfGone(e.ctx, k.KBID); !owed || err != nil {
		t.Fatalf("a deleted KB: owed %v, %v", owed, err)
	}
	if owed, err := e.store.OwePurgeIfGone(e.ctx, k.KBID); owed || err != nil {
		t.Fatalf("owed twice: %v, %v", owed, err)
	}
	if n, err := e.store.PurgeDeleted(e.ctx, e.vec, objs, k.KBID); n != 1 || err != nil {
		t.Fatalf("second purge = %d, %v", n, err)
	}
	if l, _ := objs.List(e.ctx, kb.ObjectPrefix(k.KBID)); len(l) != 0 {
		t.Errorf("late objects left: %v", l)
	}
	if _, err := e.vec.Search(e.ctx, k.KBID, []float32{1, 0, 0}, 1, nil); !errors.Is(err, vector.ErrCollectionNotFound) {
		t.Errorf("late collection left: %v", err)
	}
}

// failingRemover lists but cannot delete.
type failingRemover struct{ kb.ObjectRemover }

func (failingRemover) Delete(context.Context, string) error { return errors.New("disk on fire") }
