package outbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Retention of the outbox.
//
// Published rows are deleted once they are older than RelayConfig.Retention
// (YUXI_OUTBOX_RETENTION, default 24h), in batches that lock only the rows
// they delete and skip rows locked by anyone else. The relay never touches a
// published row (acknowledgements, claim renewals and the sweep all filter on
// published_at IS NULL), so a prune and the relay never wait on each other,
// and an unpublished row is never deleted however old it is.
//
// Deduplication. A row's dedupe_key makes its write idempotent only while the
// row exists. Each key the tree writes, and whether its suppression must
// outlive the row:
//
//	key                              written by                      after the window
//	run-finished:<run>               run.finishTx, run.CommitStep    KEPT (outbox_keys)
//	bucket:<provider>:<bucket>:…     the bucket-notification webhook KEPT (outbox_keys)
//	step:<run>:1                     queue (run creation)            expires
//	step:<run>:<n>                   run.CompleteToolCall (fan-in)   expires
//	step:<run>:<n>:r<k>, tool:…:r<k> run recovery sweep              expires
//	tool:<run>:<call>                run.CommitStep                  expires
//	uploaded:<file>:0                kb.Store.AddFilesTx             expires
//	uploaded:<file>:v:<version>      kb.Store.ApplyChangeTx (bucket) expires
//	parsed:<file>:<stage start>      kb.Store.FinishParseTx          expires
//
// Why the expiring ones may expire: each is written in the same transaction
// as a state transition that can happen only once, so no second write of the
// key can come later than the transaction that raced the first one — their
// keys guard against concurrent writers, not late ones. step:<run>:1 and
// uploaded:<file>:0 carry an id created in that very transaction; the fan-in
// step is emitted only by the completion that takes pending_tools to zero
// (status 'pending' → done, once per call); recovery keys carry the
// recovery_count bumped under the run's row lock; tool:<run>:<call> is
// emitted with the step record, which is written once per (run, step);
// parsed:… is guarded by the stage's (attempt, start) compare-and-set;
// uploaded:…:v:<version> by the file's source_version (a version seen again
// is "unchanged"; with no version — a bucket that reports none — a re-upload
// after the window is parsed again, which is the right outcome for a changed
// object).
//
// Why the kept ones are kept: run.finished starts non-idempotent work (it
// dispatches the thread's next queued request) and has several writers (the
// step commit, cancel paths, the recovery sweep); its transition is guarded
// too, but it is the one event whose duplicate would act twice, and a key
// per run is cheap. bucket:… keys are the only dedupe we have against a
// sender we do not control: S3/SNS, MinIO and Pub/Sub push may redeliver an
// accepted notification hours or days later (Pub/Sub keeps messages up to 7
// days), and without the key it would become a new event. Both live in
// outbox_keys for RelayConfig.KeyRetention (YUXI_OUTBOX_KEY_RETENTION,
// default 7 days, longer than any of those senders retries): about 100 bytes
// per run with index, ~60 MB per million runs.
var keptKeyPrefixes = []string{"run-finished:", "bucket:"}

// keepsKey reports whether a dedupe key must outlive its outbox row.
func keepsKey(key string) bool {
	for _, p := range keptKeyPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// insertKeptSQL takes the key in outbox_keys first: a key already there (its
// row pruned or not) skips the event, exactly like the outbox's own unique
// dedupe_key does while the row exists. Concurrent writers of one key queue on
// the primary key; the second one writes nothing.
const insertKeptSQL = `
	WITH k AS (INSERT INTO outbox_keys (key) VALUES ($7) ON CONFLICT (key) DO NOTHING RETURNING key)
	INSERT INTO outbox (event_id, type, source, subject, data, extensions, dedupe_key, claimed_until)
	SELECT $1::text, $2::text, $3::text, NULLIF($4::text, ''), $5::jsonb, $6::jsonb, k.key, now() + $8::interval FROM k
	ON CONFLICT (dedupe_key) DO NOTHING
	RETURNING id`

// Execer runs a statement: a pool, or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// PruneBatch deletes at most limit published rows older than retention
// through db, and reports how many it deleted. Rows locked by someone else
// are skipped, never waited for.
func PruneBatch(ctx context.Context, db Execer, retention time.Duration, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM outbox WHERE id IN (
		SELECT id FROM outbox
		WHERE published_at IS NOT NULL AND published_at < now() - $1::float8 * interval '1 second'
		ORDER BY published_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, retention.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune outbox: %w", err)
	}
	return tag.RowsAffected(), nil
}

// PruneKeysBatch deletes at most limit kept dedupe keys older than retention.
func PruneKeysBatch(ctx context.Context, db Execer, retention time.Duration, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM outbox_keys WHERE key IN (
		SELECT key FROM outbox_keys WHERE created_at < now() - $1::float8 * interval '1 second'
		ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, retention.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune outbox keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Prune deletes published rows past the retention window and kept keys past
// theirs, PruneBatch rows per statement (each its own short transaction), at
// most PruneBatches statements of each per call so one sweep stays short;
// a backlog drains over the following sweeps. It returns the rows deleted.
// Safe to run from many processes at once.
func (r *Relay) Prune(ctx context.Context) (int, error) {
	total := 0
	for range r.cfg.PruneBatches {
		n, err := PruneBatch(ctx, r.pool, r.cfg.Retention, r.cfg.PruneBatch)
		total += int(n)
		if err != nil {
			return total, err
		}
		if n < int64(r.cfg.PruneBatch) {
			break
		}
	}
	for range r.cfg.PruneBatches {
		n, err := PruneKeysBatch(ctx, r.pool, r.cfg.KeyRetention, r.cfg.PruneBatch)
		if err != nil {
			return total, err
		}
		if n < int64(r.cfg.PruneBatch) {
			break
		}
	}
	return total, nil
}
