package kb

import (
	"context"
	"fmt"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
)

// SweepUploads removes uploads never registered: objects under a KB's
// upload prefix, written more than grace before now, that no file of that
// KB points at (POST …/files/upload stores the object; POST …/documents
// registers it — an upload never followed by a registration would stay
// forever). It returns how many it removed. A registration racing the
// removal of an upload older than grace finds the object gone (404
// upload_not_found) or, in the instant between its check and its commit,
// leaves a file whose parse fails; grace (YUXI_UPLOAD_GRACE, 24 h by
// default) makes that a day-old upload registered at that very moment.
func (s *Store) SweepUploads(ctx context.Context, objs blob.Store, grace time.Duration, now time.Time) (int, error) {
	cutoff := now.Add(-grace)
	rows, err := s.pool.Query(ctx, `SELECT kb_id FROM knowledge_bases ORDER BY kb_id`)
	if err != nil {
		return 0, err
	}
	var kbs []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		kbs = append(kbs, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, kbID := range kbs {
		list, err := objs.List(ctx, uploadPrefix(kbID))
		if err != nil {
			return n, fmt.Errorf("list uploads of %s: %w", kbID, err)
		}
		var old []string
		for _, o := range list {
			if !o.ModTime.IsZero() && o.ModTime.Before(cutoff) {
				old = append(old, o.Key)
			}
		}
		if len(old) == 0 {
			continue
		}
		used := map[string]bool{}
		rows, err := s.pool.Query(ctx, `SELECT object_key FROM knowledge_files WHERE kb_id = $1 AND object_key = ANY($2)`, kbID, old)
		if err != nil {
			return n, err
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return n, err
			}
			used[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return n, err
		}
		for _, k := range old {
			if used[k] {
				continue
			}
			if err := objs.Delete(ctx, k); err != nil {
				return n, fmt.Errorf("delete upload %s: %w", k, err)
			}
			n++
		}
	}
	return n, nil
}
