package postgres

import (
	"context"
	"fmt"
	"sort"
)

// SealedColumn names a text column of sealed values (shared/secret) and the
// column that identifies its rows. Both are the owner's constants, never
// input.
type SealedColumn struct{ Table, Key, Column string }

// ResealColumn passes every non-empty value of c to reseal and writes back
// the values it changes, each with a compare-and-swap (the row keeps a value
// another writer stored meanwhile: that one was sealed with the current key
// already). It answers how many rows changed and, sorted, the keys whose
// values reseal refused (a value that does not open). Only the table's owner
// calls it.
func ResealColumn(ctx context.Context, db DB, c SealedColumn, reseal func(key, sealed string) (string, bool, error)) (int, []string, error) {
	rows, err := db.Query(ctx, fmt.Sprintf(`SELECT %s::text, %s FROM %s WHERE COALESCE(%s, '') <> ''`, c.Key, c.Column, c.Table, c.Column))
	if err != nil {
		return 0, nil, fmt.Errorf("read %s.%s: %w", c.Table, c.Column, err)
	}
	type value struct{ key, sealed string }
	var values []value
	for rows.Next() {
		var v value
		if err := rows.Scan(&v.key, &v.sealed); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("read %s.%s: %w", c.Table, c.Column, err)
		}
		values = append(values, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("read %s.%s: %w", c.Table, c.Column, err)
	}
	changed, failed := 0, []string{}
	update := fmt.Sprintf(`UPDATE %s SET %s = $3 WHERE %s::text = $1 AND %s = $2`, c.Table, c.Column, c.Key, c.Column)
	for _, v := range values {
		out, ok, err := reseal(v.key, v.sealed)
		if err != nil {
			failed = append(failed, v.key)
			continue
		}
		if !ok {
			continue
		}
		tag, err := db.Exec(ctx, update, v.key, v.sealed, out)
		if err != nil {
			return changed, failed, fmt.Errorf("reseal %s.%s of %s: %w", c.Table, c.Column, v.key, err)
		}
		changed += int(tag.RowsAffected())
	}
	sort.Strings(failed)
	return changed, failed, nil
}
