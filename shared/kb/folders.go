package kb

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// Statuses the pending-work routes pick up, as the original: files waiting
// for a parse, and files waiting for (or failed at) indexing.
var (
	PendingParseStatuses = []string{StatusUploaded}
	PendingIndexStatuses = []string{StatusParsed, StatusErrorIndexing}
)

// validFolderName trims name and checks it as a folder name.
func validFolderName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 255 || strings.ContainsAny(name, "/\\") {
		return "", failure.Unprocessable("invalid_folder", "folder name must be 1 to 255 characters without slashes")
	}
	if name == "." || name == ".." { // they would name this folder or its parent in every path built from them
		return "", failure.Unprocessable("invalid_folder", "folder name %q is reserved", name)
	}
	return name, nil
}

// folderTaken reports whether parentID (nil: the root) of kbID holds a folder
// named name other than except.
func folderTaken(ctx context.Context, tx pgx.Tx, kbID, name string, parentID *string, except string) (bool, error) {
	var taken bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM knowledge_files WHERE kb_id = $1 AND is_folder AND filename = $2
		AND parent_id IS NOT DISTINCT FROM $3 AND file_id <> $4)`, kbID, name, parentID, except).Scan(&taken)
	return taken, err
}

// lockTree serialises changes to kbID's folder tree (create, rename, move)
// until tx ends: checks for cycles and duplicate names read rows that a
// concurrent change could be writing.
func lockTree(ctx context.Context, tx pgx.Tx, kbID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('kb-tree:' || $1, 0))`, kbID)
	return err
}

// lockFile loads a file or folder of kbID for update.
func lockFile(ctx context.Context, tx pgx.Tx, kbID, fileID string) (File, error) {
	f, err := scanFile(tx.QueryRow(ctx, `SELECT `+fileCols+` FROM knowledge_files WHERE file_id = $1 AND kb_id = $2 FOR UPDATE`, fileID, kbID))
	if errors.Is(err, pgx.ErrNoRows) {
		return File{}, failure.NotFound("file_not_found", "file %s not found in this knowledge base", fileID)
	}
	return f, err
}

// MoveFileTx moves a file or folder of kbID under newParentID (nil: the
// root), in tx. The target must be a folder of the same KB; a folder
// cannot move into itself or below itself, nor next to a folder of the same
// name.
func (s *Store) MoveFileTx(ctx context.Context, tx pgx.Tx, kbID, fileID string, newParentID *string) (File, error) {
	if err := lockTree(ctx, tx, kbID); err != nil {
		return File{}, err
	}
	f, err := lockFile(ctx, tx, kbID, fileID)
	if err != nil {
		return File{}, err
	}
	if newParentID != nil && *newParentID == "" {
		newParentID = nil
	}
	if newParentID != nil {
		var isFolder bool
		err := tx.QueryRow(ctx, `SELECT is_folder FROM knowledge_files WHERE file_id = $1 AND kb_id = $2`, *newParentID, kbID).Scan(&isFolder)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !isFolder) {
			return File{}, failure.NotFound("folder_not_found", "target folder %s not found in this knowledge base", *newParentID)
		}
		if err != nil {
			return File{}, err
		}
		if f.IsFolder {
			// The target's ancestors (itself included) must not include f.
			var cycle bool
			if err := tx.QueryRow(ctx, `WITH RECURSIVE up AS (
					SELECT file_id, parent_id FROM knowledge_files WHERE file_id = $1
					UNION SELECT k.file_id, k.parent_id FROM knowledge_files k JOIN up ON k.file_id = up.parent_id)
				SELECT EXISTS (SELECT 1 FROM up WHERE file_id = $2)`, *newParentID, fileID).Scan(&cycle); err != nil {
				return File{}, err
			}
			if cycle {
				return File{}, failure.Unprocessable("invalid_move", "a folder cannot move into itself or one of its subfolders")
			}
		}
	}
	if f.IsFolder {
		taken, err := folderTaken(ctx, tx, kbID, f.Filename, newParentID, fileID)
		if err != nil {
			return File{}, err
		}
		if taken {
			return File{}, failure.Conflict("folder_exists", "a folder named %q already exists there", f.Filename)
		}
	}
	return scanFile(tx.QueryRow(ctx, `UPDATE knowledge_files SET parent_id = $2, updated_at = clock_timestamp()
		WHERE file_id = $1 RETURNING `+fileCols, fileID, newParentID))
}

// RenameFolderTx renames a folder of kbID, in tx.
func (s *Store) RenameFolderTx(ctx context.Context, tx pgx.Tx, kbID, folderID, name string) (File, error) {
	name, err := validFolderName(name)
	if err != nil {
		return File{}, err
	}
	if err := lockTree(ctx, tx, kbID); err != nil {
		return File{}, err
	}
	f, err := lockFile(ctx, tx, kbID, folderID)
	if err != nil {
		return File{}, err
	}
	if !f.IsFolder {
		return File{}, failure.NotFound("folder_not_found", "%s is not a folder", folderID)
	}
	taken, err := folderTaken(ctx, tx, kbID, name, f.ParentID, folderID)
	if err != nil {
		return File{}, err
	}
	if taken {
		return File{}, failure.Conflict("folder_exists", "a folder named %q already exists here", name)
	}
	return scanFile(tx.QueryRow(ctx, `UPDATE knowledge_files SET filename = $2, original_filename = $2, updated_at = clock_timestamp()
		WHERE file_id = $1 RETURNING `+fileCols, folderID, name))
}

// FileExists reports whether kbID holds a file (not a folder) named name: a
// display name anywhere in the KB, or a relative path "folder/…/name"
// resolved from the root through folders.
func (s *Store) FileExists(ctx context.Context, kbID, name string) (bool, error) {
	db := s.pool
	name = strings.Trim(strings.TrimSpace(strings.ReplaceAll(name, "\\", "/")), "/")
	if name == "" {
		return false, failure.Invalid("invalid_filename", "filename is required")
	}
	parts := strings.Split(name, "/")
	var exists bool
	if len(parts) == 1 {
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM knowledge_files WHERE kb_id = $1 AND NOT is_folder
			AND (filename = $2 OR original_filename = $2))`, kbID, name).Scan(&exists)
		return exists, err
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return false, failure.Invalid("invalid_filename", "the path %q has an empty or relative segment", name)
		}
	}
	// Walk the folders level by level; the last segment is the file.
	err := db.QueryRow(ctx, `WITH RECURSIVE walk AS (
			SELECT file_id, 1 AS depth FROM knowledge_files
			WHERE kb_id = $1 AND is_folder AND parent_id IS NULL AND filename = ($2::text[])[1]
			UNION ALL
			SELECT k.file_id, walk.depth + 1 FROM knowledge_files k JOIN walk ON k.parent_id = walk.file_id
			WHERE k.kb_id = $1 AND k.is_folder AND walk.depth < $3 - 1 AND k.filename = ($2::text[])[walk.depth + 1])
		SELECT EXISTS (SELECT 1 FROM knowledge_files f JOIN walk ON f.parent_id = walk.file_id
			WHERE walk.depth = $3 - 1 AND f.kb_id = $1 AND NOT f.is_folder
			AND (f.filename = ($2::text[])[$3] OR f.original_filename = ($2::text[])[$3]))`, kbID, parts, len(parts)).Scan(&exists)
	return exists, err
}

// pendingFileIDs lists kbID's files (not folders) in one of statuses.
func (s *Store) pendingFileIDs(ctx context.Context, kbID string, statuses []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT file_id FROM knowledge_files WHERE kb_id = $1 AND NOT is_folder AND status = ANY($2)
		ORDER BY created_at, file_id`, kbID, statuses)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// restageBatch bounds the files one transaction of RestagePending sends.
const restageBatch = 500

// restagePending sends every file of kbID whose status is one of statuses to
// stage to (see RestageTx), restageBatch files per transaction run by tx
// (an outbox transaction); each batch re-checks the statuses under lock, so a
// file that moved on meanwhile is left alone. It returns how many files were
// sent.
func (s *Store) restagePending(ctx context.Context, tx func(func(pgx.Tx, outbox.Emit) error) error,
	kbID string, statuses []string, to string, chunking json.RawMessage) (int, error) {
	ids, err := s.pendingFileIDs(ctx, kbID, statuses)
	if err != nil {
		return 0, err
	}
	sent := 0
	for start := 0; start < len(ids); start += restageBatch {
		batch := ids[start:min(start+restageBatch, len(ids))]
		err := tx(func(tx pgx.Tx, emit outbox.Emit) error {
			rows, err := tx.Query(ctx, `SELECT file_id FROM knowledge_files WHERE kb_id = $1 AND file_id = ANY($2)
				AND status = ANY($3) ORDER BY file_id FOR UPDATE`, kbID, batch, statuses)
			if err != nil {
				return err
			}
			still, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			items, err := s.RestageTx(ctx, tx, emit, kbID, still, to, chunking)
			for _, it := range items {
				if it["status"] == to && it["error"] == nil {
					sent++
				}
			}
			return err
		})
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// ReplaceMarkdownTx points a parsed file of kbID at new Markdown (key), in
// tx, if the file is still at revision (its updated_at when the editor read
// it). Only a parsed file can be edited: nothing is derived from its
// Markdown yet, and indexing it afterwards uses the edit. It returns the file
// and the key it pointed at before.
func (s *Store) ReplaceMarkdownTx(ctx context.Context, tx pgx.Tx, kbID, fileID, key string, revision time.Time) (File, *string, error) {
	f, err := lockFile(ctx, tx, kbID, fileID)
	if err != nil {
		return File{}, nil, err
	}
	if f.IsFolder || f.Status != StatusParsed {
		return File{}, nil, failure.Conflict("file_state_conflict", "only parsed files can be edited; this one is %s", f.Status)
	}
	if !f.UpdatedAt.Equal(revision) {
		return File{}, nil, failure.Conflict("revision_conflict", "the file changed since it was read (revision %s, now %s); read it again",
			revision.UTC().Format(time.RFC3339Nano), f.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	nf, err := scanFile(tx.QueryRow(ctx, `UPDATE knowledge_files SET markdown_key = $2, updated_at = clock_timestamp()
		WHERE file_id = $1 RETURNING `+fileCols, fileID, key))
	return nf, f.MarkdownKey, err
}
