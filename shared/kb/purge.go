package kb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/blob"
)

// CollectionDropper drops a KB's vector collection (a missing one is not an error).
type CollectionDropper interface {
	DropCollection(ctx context.Context, name string) error
}

// ObjectRemover lists and deletes stored objects.
type ObjectRemover interface {
	List(ctx context.Context, prefix string) ([]blob.Info, error)
	Delete(ctx context.Context, key string) error
}

// PurgeDeleted removes the vector collections and objects of deleted KBs
// (knowledge_base_purges, written by Delete): kbID's alone, or every owed
// one when kbID is "". Each KB is purged under its row's lock, so concurrent
// purgers skip each other's work; a failure is recorded on the row (attempts,
// last_error) and the row stays for the next sweep. It returns how many KBs
// were purged.
func (s *Store) PurgeDeleted(ctx context.Context, vs CollectionDropper, objs ObjectRemover, kbID string) (int, error) {
	n := 0
	var errs []error
	failed := map[string]bool{}
	for {
		var id string
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var prefix string
			err := tx.QueryRow(ctx, `SELECT kb_id, object_prefix FROM knowledge_base_purges
				WHERE ($1 = '' OR kb_id = $1) AND NOT (kb_id = ANY($2)) ORDER BY created_at, kb_id
				LIMIT 1 FOR UPDATE SKIP LOCKED`, kbID, keys(failed)).Scan(&id, &prefix)
			if err != nil {
				return err
			}
			if perr := purge(ctx, vs, objs, id, prefix); perr != nil {
				failed[id] = true
				errs = append(errs, perr)
				_, err = tx.Exec(ctx, `UPDATE knowledge_base_purges SET attempts = attempts + 1, last_error = $2,
					updated_at = clock_timestamp() WHERE kb_id = $1`, id, perr.Error())
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM knowledge_base_purges WHERE kb_id = $1`, id)
			return err
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return n, errors.Join(errs...)
		}
		if err != nil {
			return n, errors.Join(append(errs, err)...)
		}
		if !failed[id] {
			n++
		}
	}
}

// OwePurgeIfGone records kbID's collection and objects as owed when the KB
// no longer exists, and reports whether it did. A stage that lost its file
// calls it: the KB may have been deleted — and purged — while the stage was
// writing vectors or objects for it, which would otherwise outlive it.
func (s *Store) OwePurgeIfGone(ctx context.Context, kbID string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO knowledge_base_purges (kb_id, object_prefix)
		SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM knowledge_bases WHERE kb_id = $1)
		ON CONFLICT (kb_id) DO NOTHING`, kbID, ObjectPrefix(kbID))
	if err != nil {
		return false, fmt.Errorf("record the purge of %s: %w", kbID, err)
	}
	return tag.RowsAffected() > 0, nil
}

func purge(ctx context.Context, vs CollectionDropper, objs ObjectRemover, kbID, prefix string) error {
	if vs != nil {
		for _, name := range []string{kbID, GraphCollection(kbID)} {
			if err := vs.DropCollection(ctx, name); err != nil {
				return fmt.Errorf("drop the vector collection %s of %s: %w", name, kbID, err)
			}
		}
	}
	if objs == nil || prefix == "" {
		return nil
	}
	list, err := objs.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("list the objects of %s: %w", kbID, err)
	}
	for _, o := range list {
		if err := objs.Delete(ctx, o.Key); err != nil {
			return fmt.Errorf("delete object %s of %s: %w", o.Key, kbID, err)
		}
	}
	return nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
