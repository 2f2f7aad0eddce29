package kb

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// SweepConfig tunes file recovery.
type SweepConfig struct {
	ParseLease  time.Duration // a parsing stage older than this is presumed dead (default 15m)
	IndexLease  time.Duration // likewise for indexing (default 15m)
	Grace       time.Duration // an uploaded/parsed file whose event got lost is re-driven after this (default 2m)
	MaxAttempts int           // then the file fails with an error status (default 5)
	Batch       int
}

func (c *SweepConfig) defaults() {
	if c.ParseLease <= 0 {
		c.ParseLease = 15 * time.Minute
	}
	if c.IndexLease <= 0 {
		c.IndexLease = 15 * time.Minute
	}
	if c.Grace <= 0 {
		c.Grace = 2 * time.Minute
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.Batch <= 0 {
		c.Batch = 200
	}
}

// FileRecovery reports one re-driven or failed file.
type FileRecovery struct {
	FileID string
	KBID   string
	Status string
	Action string // redrive_parse | redrive_index | failed
}

// RecoverStuckFiles re-drives files whose function died or whose event was
// lost: a stage held past its lease, or a file waiting past the grace time
// for its next stage. A file that exhausted MaxAttempts ends in an error
// status with a message saying so. No file stays in parsing or indexing.
// An uploaded file without an ingestion batch that came from an upload was
// added with documents/add: it waits for an explicit parse and is left
// alone (bucket files have no batch either and are re-driven).
// A re-driven file is re-driven again only after another grace period (the
// sweep marks it updated; the stage itself is left for the redelivered event
// to reclaim), so frequent sweeps do not pile up events for one file.
// Safe to run concurrently (rows are taken with SKIP LOCKED).
func (store *Store) RecoverStuckFiles(ctx context.Context, ob *outbox.Outbox, cfg SweepConfig) ([]FileRecovery, error) {
	cfg.defaults()
	var out []FileRecovery
	err := ob.Tx(ctx, store.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		rows, err := tx.Query(ctx, `SELECT file_id, kb_id, status, stage_attempts, coalesce(processing_params->>'auto_index', 'true') = 'true'
			FROM knowledge_files
			WHERE NOT is_folder AND (
				(status = 'parsing' AND stage_started_at < clock_timestamp() - $1::interval
					AND updated_at < clock_timestamp() - $3::interval) OR
				(status = 'indexing' AND stage_started_at < clock_timestamp() - $2::interval
					AND updated_at < clock_timestamp() - $3::interval) OR
				(status = 'uploaded' AND updated_at < clock_timestamp() - $3::interval AND ingest_cancelled_at IS NULL
					AND (ingest_batch IS NOT NULL OR source <> 'upload')) OR
				(status = 'parsed' AND updated_at < clock_timestamp() - $3::interval AND ingest_cancelled_at IS NULL
					AND coalesce(processing_params->>'auto_index', 'true') = 'true'))
			ORDER BY updated_at LIMIT $4 FOR UPDATE SKIP LOCKED`,
			cfg.ParseLease.String(), cfg.IndexLease.String(), cfg.Grace.String(), cfg.Batch)
		if err != nil {
			return err
		}
		type stuck struct {
			fileID, kbID, status string
			attempts             int
			autoIndex            bool
		}
		var list []stuck
		for rows.Next() {
			var s stuck
			if err := rows.Scan(&s.fileID, &s.kbID, &s.status, &s.attempts, &s.autoIndex); err != nil {
				rows.Close()
				return err
			}
			list = append(list, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, s := range list {
			rec := FileRecovery{FileID: s.fileID, KBID: s.kbID, Status: s.status}
			parse := s.status == StatusParsing || s.status == StatusUploaded
			if s.attempts >= cfg.MaxAttempts && (s.status == StatusParsing || s.status == StatusIndexing) {
				to := StatusErrorParsing
				if !parse {
					to = StatusErrorIndexing
				}
				msg := fmt.Sprintf("gave up after %d attempts: the worker stopped before finishing each time", s.attempts)
				if _, err := tx.Exec(ctx, `UPDATE knowledge_files SET status = $2, error_message = $3, stage_started_at = NULL,
					updated_at = clock_timestamp() WHERE file_id = $1`, s.fileID, to, msg); err != nil {
					return err
				}
				rec.Action = "failed"
				out = append(out, rec)
				continue
			}
			if _, err := tx.Exec(ctx, `UPDATE knowledge_files SET updated_at = clock_timestamp() WHERE file_id = $1`, s.fileID); err != nil {
				return err
			}
			var p outbox.Pending
			if parse {
				rec.Action = "redrive_parse"
				p = outbox.Pending{Payload: events.DocumentUploaded{KBID: s.kbID, FileID: s.fileID}}
			} else {
				rec.Action = "redrive_index"
				p = outbox.Pending{Payload: events.DocumentParsed{KBID: s.kbID, FileID: s.fileID}}
			}
			if err := emit(p); err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}
