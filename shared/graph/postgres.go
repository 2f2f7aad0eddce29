package graph

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Postgres is the embedded engine: the tables of migration 0060_graph.sql.
//
// Writes to one knowledge base's graph are serialised by a transaction-scoped
// advisory lock on the kb id: a write removes entities nothing mentions, and
// without the lock it could remove one a concurrent write is about to
// mention. Writers batch many chunks per call, so the lock is taken once per
// batch, not per chunk.
type Postgres struct {
	pool *pgxpool.Pool
	sums sumsPool // RankMentioned's accumulators
}

// NewPostgres returns the engine over pool.
func NewPostgres(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool} }

var _ Engine = (*Postgres)(nil)

func lockKB(ctx context.Context, tx pgx.Tx, kbID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('graph:' || $1, 0))`, kbID)
	return err
}

// WriteChunks implements Engine.
func (p *Postgres) WriteChunks(ctx context.Context, kbID string, chunks []ChunkGraph) error {
	if len(chunks) == 0 {
		return nil
	}
	return postgres.Tx(ctx, p.pool, func(tx pgx.Tx) error {
		if err := lockKB(ctx, tx, kbID); err != nil {
			return err
		}
		return p.WriteChunksTx(ctx, tx, kbID, chunks)
	})
}

// WriteChunksTx is WriteChunks in the caller's transaction, which must hold
// the knowledge base's graph lock (lockKB). Entities and relations are
// upserted (one statement each over arrays); mentions, which the same
// transaction has just deleted for these chunks, are copied in with COPY.
func (p *Postgres) WriteChunksTx(ctx context.Context, tx pgx.Tx, kbID string, chunks []ChunkGraph) error {
	var (
		chunkIDs                         []string
		eIDs, eNames, eLabels, eDescs    []string
		rIDs, rSrc, rDst, rTypes, rDescs []string
		ems, rms                         [][]any
	)
	// A chunk listed twice: its last graph wins, as two calls would leave it.
	last := make(map[string]int, len(chunks))
	for i, c := range chunks {
		last[c.ChunkID] = i
	}
	seenE, seenR := map[string]bool{}, map[string]bool{}
	for i, c := range chunks {
		if last[c.ChunkID] != i {
			continue
		}
		chunkIDs = append(chunkIDs, c.ChunkID)
		mine := map[string]bool{}
		for _, e := range c.Entities {
			if e.ID == "" || mine[e.ID] {
				continue
			}
			mine[e.ID] = true
			ems = append(ems, []any{kbID, c.ChunkID, e.ID, c.FileID})
			if !seenE[e.ID] {
				seenE[e.ID] = true
				eIDs, eNames, eLabels, eDescs = append(eIDs, e.ID), append(eNames, e.Name), append(eLabels, e.Label), append(eDescs, e.Description)
			}
		}
		mineR := map[string]bool{}
		for _, r := range c.Relations {
			if !mine[r.Source] || !mine[r.Target] {
				return fmt.Errorf("chunk %s: relation %s names an entity the chunk does not list", c.ChunkID, r.ID)
			}
			if mineR[r.ID] {
				continue
			}
			mineR[r.ID] = true
			rms = append(rms, []any{kbID, c.ChunkID, r.ID, c.FileID})
			if !seenR[r.ID] {
				seenR[r.ID] = true
				rIDs, rSrc, rDst, rTypes, rDescs = append(rIDs, r.ID), append(rSrc, r.Source), append(rDst, r.Target), append(rTypes, r.Type), append(rDescs, r.Description)
			}
		}
	}
	ents, rels, err := dropMentions(ctx, tx, kbID, `chunk_id = ANY($2)`, chunkIDs)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	if len(eIDs) > 0 {
		b.Queue(`INSERT INTO graph_entities (kb_id, entity_id, name, label, description)
			SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[])
			ON CONFLICT (kb_id, entity_id) DO UPDATE SET description = EXCLUDED.description
			WHERE graph_entities.description = '' AND EXCLUDED.description <> ''`,
			kbID, eIDs, eNames, eLabels, eDescs)
	}
	if len(rIDs) > 0 {
		b.Queue(`INSERT INTO graph_relations (kb_id, relation_id, source_id, target_id, type, description)
			SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
			ON CONFLICT (kb_id, relation_id) DO UPDATE SET description = EXCLUDED.description
			WHERE graph_relations.description = '' AND EXCLUDED.description <> ''`,
			kbID, rIDs, rSrc, rDst, rTypes, rDescs)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write graph chunks: %w", err)
	}
	for _, m := range []struct {
		table, col string
		rows       [][]any
	}{{"graph_entity_mentions", "entity_id", ems}, {"graph_relation_mentions", "relation_id", rms}} {
		if len(m.rows) == 0 {
			continue
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{m.table}, []string{"kb_id", "chunk_id", m.col, "file_id"},
			pgx.CopyFromRows(m.rows)); err != nil {
			return fmt.Errorf("write graph chunks: %s: %w", m.table, err)
		}
	}
	_, err = collect(ctx, tx, kbID, ents, rels)
	return err
}

// dropMentions deletes the mentions matching where ($1 = kb id, $2 = arg)
// and returns the entities and relations they named.
func dropMentions(ctx context.Context, tx pgx.Tx, kbID, where string, arg any) (ents, rels []string, err error) {
	rows, err := tx.Query(ctx, `DELETE FROM graph_entity_mentions WHERE kb_id = $1 AND `+where+` RETURNING entity_id`, kbID, arg)
	if err != nil {
		return nil, nil, err
	}
	if ents, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, nil, err
	}
	rows, err = tx.Query(ctx, `DELETE FROM graph_relation_mentions WHERE kb_id = $1 AND `+where+` RETURNING relation_id`, kbID, arg)
	if err != nil {
		return nil, nil, err
	}
	if rels, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, nil, err
	}
	return ents, rels, nil
}

// collect removes, among the given entities and relations, those nothing
// mentions any more (and relations left without an endpoint), and returns
// the vector ids (EntityVectorID, TripleVectorID) of what it removed.
func collect(ctx context.Context, tx pgx.Tx, kbID string, ents, rels []string) ([]string, error) {
	var gone []string
	relIDs := func(rows pgx.Rows, err error) error {
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			var r Relation
			err := row.Scan(&r.ID, &r.Source, &r.Target)
			return TripleVectorID(r), err
		})
		gone = append(gone, ids...)
		return err
	}
	if len(rels) > 0 {
		if err := relIDs(tx.Query(ctx, `DELETE FROM graph_relations r WHERE r.kb_id = $1 AND r.relation_id = ANY($2)
			AND NOT EXISTS (SELECT 1 FROM graph_relation_mentions m WHERE m.kb_id = $1 AND m.relation_id = r.relation_id)
			RETURNING relation_id, source_id, target_id`,
			kbID, uniq(rels))); err != nil {
			return nil, fmt.Errorf("collect relations: %w", err)
		}
	}
	if len(ents) > 0 {
		rows, err := tx.Query(ctx, `DELETE FROM graph_entities e WHERE e.kb_id = $1 AND e.entity_id = ANY($2)
			AND NOT EXISTS (SELECT 1 FROM graph_entity_mentions m WHERE m.kb_id = $1 AND m.entity_id = e.entity_id)
			RETURNING entity_id`, kbID, uniq(ents))
		if err != nil {
			return nil, fmt.Errorf("collect entities: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		gone = append(gone, ids...) // EntityVectorID is the entity's id
		// A relation is mentioned only with both its endpoints, so none
		// should remain; this keeps the graph closed if one does.
		if len(ids) > 0 {
			if err := relIDs(tx.Query(ctx, `DELETE FROM graph_relations WHERE kb_id = $1 AND (source_id = ANY($2) OR target_id = ANY($2))
				RETURNING relation_id, source_id, target_id`, kbID, ids)); err != nil {
				return nil, err
			}
		}
	}
	return gone, nil
}

func uniq(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// RemoveChunks implements Engine.
func (p *Postgres) RemoveChunks(ctx context.Context, kbID string, chunkIDs []string) error {
	if len(chunkIDs) == 0 {
		return nil
	}
	return p.remove(ctx, kbID, `chunk_id = ANY($2)`, chunkIDs)
}

// DeleteFile implements Engine.
func (p *Postgres) DeleteFile(ctx context.Context, kbID, fileID string) error {
	return p.remove(ctx, kbID, `file_id = $2`, fileID)
}

func (p *Postgres) remove(ctx context.Context, kbID, where string, arg any) error {
	return postgres.Tx(ctx, p.pool, func(tx pgx.Tx) error {
		if err := lockKB(ctx, tx, kbID); err != nil {
			return err
		}
		ents, rels, err := dropMentions(ctx, tx, kbID, where, arg)
		if err != nil {
			return err
		}
		_, err = collect(ctx, tx, kbID, ents, rels)
		return err
	})
}

// DeleteKB implements Engine.
func (p *Postgres) DeleteKB(ctx context.Context, kbID string) error {
	return postgres.Tx(ctx, p.pool, func(tx pgx.Tx) error {
		if err := lockKB(ctx, tx, kbID); err != nil {
			return err
		}
		for _, t := range []string{"graph_entity_mentions", "graph_relation_mentions", "graph_relations", "graph_entities"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+t+` WHERE kb_id = $1`, kbID); err != nil {
				return fmt.Errorf("delete %s: %w", t, err)
			}
		}
		return nil
	})
}

// Expand implements Engine: one indexed query per hop (relations touching
// the frontier, by the source and target indexes; pruned, one per
// prunedFrontier nodes until the node cap), then one for the entities.
func (p *Postgres) Expand(ctx context.Context, kbID string, seeds []string, depth int, lim Limits) (Subgraph, error) {
	var sg Subgraph
	err := ExpandBFS(&sg, seeds, depth, lim, func(ids []string) ([]Entity, error) {
		return p.entities(ctx, kbID, ids)
	}, func(frontier []string) ([]Relation, error) {
		rels, err := p.hop(ctx, kbID, frontier, lim.PerNode)
		if err != nil {
			return nil, fmt.Errorf("expand: %w", err)
		}
		return rels, nil
	})
	return sg, err
}

// ExpandIDs is the retrieval-only Expand (idExpander): the same walk,
// limits and result ids as Expand, but entities carry only their ids and
// relations only their ids and ends (PersonalizedPageRank needs no more), so
// a query reads index entries and ids instead of names and descriptions.
// The seed check and the first hop go in one round trip: the first hop's
// relations are fetched for the first frontier part of the seeds as given
// (an unknown id has no relations: relation ends exist) and used for
// ExpandBFS's first hop call, whose frontier is the first part of the
// existing seeds, when that is the same set: all seeds fit in one part, or
// every seed of the first part exists. So the walk is exactly Expand's.
func (p *Postgres) ExpandIDs(ctx context.Context, kbID string, seeds []string, depth int, lim Limits) (Subgraph, error) {
	var sg Subgraph
	checked, hopped := false, false
	var ahead []string // the seeds whose first hop was fetched with the seed check
	aheadAll := false  // ahead holds every seed
	var aheadRels []Relation
	err := ExpandBFS(&sg, seeds, depth, lim, func(ids []string) ([]Entity, error) {
		if checked {
			// The entities the walk reached are ends of relations, which
			// exist: a chunk that states a relation mentions both ends (Build),
			// and removal keeps an entity while anything mentions it.
			out := make([]Entity, len(ids))
			for i, id := range ids {
				out[i].ID = id
			}
			return out, nil
		}
		checked = true // the seeds: only existing ones count
		b := &pgx.Batch{}
		var ents []Entity
		b.Queue(`SELECT entity_id FROM graph_entities WHERE kb_id = $1 AND entity_id = ANY($2)`, kbID, ids).Query(func(rows pgx.Rows) error {
			var err error
			ents, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Entity, error) {
				var e Entity
				return e, row.Scan(&e.ID)
			})
			return err
		})
		if depth > 0 && lim.PerNode > 0 && len(ids) > 0 {
			part := slices.Clone(ids[:min(len(ids), prunedFrontier)]) // ExpandBFS reuses ids' array
			sql, args := hopQuery(kbID, part, lim.PerNode, idCols)
			b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
				var err error
				aheadRels, err = relationIDs(rows)
				ahead, aheadAll = part, len(part) == len(ids)
				return err
			})
		}
		if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("load entity ids: %w", err)
		}
		return ents, nil
	}, func(frontier []string) ([]Relation, error) {
		first := !hopped
		hopped = true
		if first && ahead != nil && (aheadAll || slices.Equal(frontier, ahead)) {
			return aheadRels, nil
		}
		sql, args := hopQuery(kbID, frontier, lim.PerNode, idCols)
		rows, err := p.pool.Query(ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("expand: %w", err)
		}
		return relationIDs(rows)
	})
	return sg, err
}

// idCols are the relation columns ExpandIDs reads.
const idCols = "relation_id, source_id, target_id"

// relationIDs reads the rows of a hop over idCols: (id, source, target) as
// text, taken from the raw values (a hop's thousands of rows without a scan
// plan each), and closes them.
func relationIDs(rows pgx.Rows) ([]Relation, error) {
	defer rows.Close()
	var out []Relation
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 3 || raw[0] == nil || raw[1] == nil || raw[2] == nil {
			return nil, fmt.Errorf("expand: unexpected relation row")
		}
		out = append(out, Relation{ID: string(raw[0]), Source: string(raw[1]), Target: string(raw[2])})
	}
	return out, rows.Err()
}

// hop returns the relations touching the frontier: all of them in relation
// id order, or with perNode > 0 each node's first perNode relations in each
// direction (by relation id, on the source and target indexes), in frontier
// order.
func (p *Postgres) hop(ctx context.Context, kbID string, frontier []string, perNode int) ([]Relation, error) {
	sql, args := hopQuery(kbID, frontier, perNode, "relation_id, source_id, target_id, type, description")
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanRelation)
}

// hopQuery is hop's query selecting cols (a constant list of
// graph_relations columns, relation_id first) and its arguments.
func hopQuery(kbID string, frontier []string, perNode int, cols string) (string, []any) {
	if perNode <= 0 {
		return `SELECT ` + cols + ` FROM graph_relations
			WHERE kb_id = $1 AND (source_id = ANY($2) OR target_id = ANY($2))
			ORDER BY relation_id`, []any{kbID, frontier}
	}
	return `SELECT r.` + strings.ReplaceAll(cols, ", ", ", r.") + `
			FROM unnest($2::text[]) WITH ORDINALITY AS f(id, n)
			CROSS JOIN LATERAL (
				(SELECT 0 AS dir, ` + cols + ` FROM graph_relations
				 WHERE kb_id = $1 AND source_id = f.id ORDER BY relation_id LIMIT $3)
				UNION ALL
				(SELECT 1, ` + cols + ` FROM graph_relations
				 WHERE kb_id = $1 AND target_id = f.id ORDER BY relation_id LIMIT $3)) r
			ORDER BY f.n, r.dir, r.relation_id`, []any{kbID, frontier, perNode}
}

func scanRelation(row pgx.CollectableRow) (Relation, error) {
	var r Relation
	err := row.Scan(&r.ID, &r.Source, &r.Target, &r.Type, &r.Description)
	return r, err
}

func scanEntity(row pgx.CollectableRow) (Entity, error) {
	var e Entity
	err := row.Scan(&e.ID, &e.Name, &e.Label, &e.Description)
	return e, err
}

// entities loads entities by id, in the order given (missing ids skipped).
func (p *Postgres) entities(ctx context.Context, kbID string, ids []string) ([]Entity, error) {
	rows, err := p.pool.Query(ctx, `SELECT e.entity_id, e.name, e.label, e.description
		FROM unnest($2::text[]) WITH ORDINALITY AS want(id, n)
		JOIN graph_entities e ON e.kb_id = $1 AND e.entity_id = want.id ORDER BY want.n`, kbID, ids)
	if err != nil {
		return nil, fmt.Errorf("load entities: %w", err)
	}
	return pgx.CollectRows(rows, scanEntity)
}

// FindEntities implements Engine.
func (p *Postgres) FindEntities(ctx context.Context, kbID, prefix string, limit int) ([]Entity, error) {
	if limit <= 0 {
		limit = 100
	}
	prefix = strings.TrimSpace(prefix)
	var rows pgx.Rows
	var err error
	if prefix == "" || prefix == "*" {
		rows, err = p.pool.Query(ctx, `SELECT e.entity_id, e.name, e.label, e.description FROM graph_entities e
			LEFT JOIN LATERAL (SELECT count(*) AS n FROM graph_entity_mentions m WHERE m.kb_id = $1 AND m.entity_id = e.entity_id) c ON true
			WHERE e.kb_id = $1 ORDER BY c.n DESC, e.entity_id LIMIT $2`, kbID, limit)
	} else {
		like := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(strings.ToLower(prefix)) + "%"
		rows, err = p.pool.Query(ctx, `SELECT e.entity_id, e.name, e.label, e.description FROM graph_entities e
			LEFT JOIN LATERAL (SELECT count(*) AS n FROM graph_entity_mentions m WHERE m.kb_id = $1 AND m.entity_id = e.entity_id) c ON true
			WHERE e.kb_id = $1 AND (lower(e.name) LIKE $2 OR e.label = $3) ORDER BY c.n DESC, e.entity_id LIMIT $4`, kbID, like, prefix, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("find entities: %w", err)
	}
	return pgx.CollectRows(rows, scanEntity)
}

// EntitiesNamed implements Engine (an index lookup per name on
// graph_entities_name).
func (p *Postgres) EntitiesNamed(ctx context.Context, kbID string, names []string, limit int) ([]Entity, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if limit <= 0 {
		limit = 10
	}
	rows, err := p.pool.Query(ctx, `SELECT e.entity_id, e.name, e.label, e.description FROM graph_entities e
		WHERE e.kb_id = $1 AND lower(e.name) = ANY($2) ORDER BY length(e.name) DESC, e.entity_id LIMIT $3`, kbID, names, limit)
	if err != nil {
		return nil, fmt.Errorf("entities named: %w", err)
	}
	return pgx.CollectRows(rows, scanEntity)
}

func (p *Postgres) pairs(ctx context.Context, sql string, args ...any) (map[string][]string, error) {
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = append(out[k], v)
	}
	return out, rows.Err()
}

// Mentions implements Engine.
func (p *Postgres) Mentions(ctx context.Context, kbID string, entityIDs []string) (map[string][]string, error) {
	return p.pairs(ctx, `SELECT entity_id, chunk_id FROM graph_entity_mentions WHERE kb_id = $1 AND entity_id = ANY($2)
		ORDER BY entity_id, chunk_id`, kbID, entityIDs)
}

// RankMentioned is RankChunks over the mentions of entityIDs (scores[i] is
// entityIDs[i]'s), ties by chunk id in byte order as RankChunks. The
// database returns the mentions over the (kb_id, entity_id, chunk_id) index
// as (entity position, chunk id) rows, in entity order, and the sums are
// taken here, in that order, by a pooled chunkSums: the mentions of the
// best-ranked entities are tens of thousands of rows, almost every chunk
// among them once, which the database's hash aggregate and sort of text
// keys took about twice as long to rank (figure 19).
func (p *Postgres) RankMentioned(ctx context.Context, kbID string, entityIDs []string, scores []float64, limit int) ([]ScoredChunk, error) {
	var ids []string
	var w []float64
	for i, id := range entityIDs {
		if scores[i] > 0 {
			ids, w = append(ids, id), append(w, scores[i])
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, `SELECT s.n::int4, m.chunk_id
		FROM unnest($2::text[]) WITH ORDINALITY AS s(id, n)
		JOIN graph_entity_mentions m ON m.kb_id = $1 AND m.entity_id = s.id`,
		pgx.QueryResultFormats{pgx.BinaryFormatCode, pgx.TextFormatCode}, kbID, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	acc := p.sums.get()
	defer p.sums.put(acc)
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 2 || len(raw[0]) != 4 {
			return nil, fmt.Errorf("rank mentions: unexpected row")
		}
		n := int(binary.BigEndian.Uint32(raw[0])) - 1
		if n < 0 || n >= len(w) {
			return nil, fmt.Errorf("rank mentions: entity position %d out of range", n+1)
		}
		acc.add(raw[1], w[n])
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return acc.top(limit), nil
}

// topK returns the k best of s (cmp < 0: better), best first; s is reordered.
func topK[T any](s []T, k int, cmp func(a, b T) int) []T {
	// A heap of the k best so far, worst on top.
	h := slices.Clone(s[:k])
	worse := func(i, j int) bool { return cmp(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && worse(r, l) {
				m = r
			}
			if !worse(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, c := range s[k:] {
		if cmp(c, h[0]) < 0 {
			h[0] = c
			down(0)
		}
	}
	slices.SortFunc(h, cmp)
	return h
}

// ChunkEntities implements Engine.
func (p *Postgres) ChunkEntities(ctx context.Context, kbID string, chunkIDs []string) (map[string][]string, error) {
	return p.pairs(ctx, `SELECT chunk_id, entity_id FROM graph_entity_mentions WHERE kb_id = $1 AND chunk_id = ANY($2)
		ORDER BY chunk_id, entity_id`, kbID, chunkIDs)
}

// Labels implements Engine.
func (p *Postgres) Labels(ctx context.Context, kbID string) ([]string, error) {
	rows, err := p.pool.Query(ctx, `SELECT DISTINCT label FROM graph_entities WHERE kb_id = $1 ORDER BY label`, kbID)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if out == nil {
		out = []string{}
	}
	return out, err
}

// Stats implements Engine.
func (p *Postgres) Stats(ctx context.Context, kbID string) (Stats, error) {
	var s Stats
	err := p.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM graph_entities WHERE kb_id = $1),
		(SELECT count(*) FROM graph_relations WHERE kb_id = $1),
		(SELECT count(DISTINCT chunk_id) FROM graph_entity_mentions WHERE kb_id = $1),
		(SELECT count(DISTINCT file_id) FROM graph_entity_mentions WHERE kb_id = $1)`, kbID).
		Scan(&s.Entities, &s.Relations, &s.Chunks, &s.Files)
	if err != nil {
		return s, err
	}
	rows, err := p.pool.Query(ctx, `SELECT label, count(*) FROM graph_entities WHERE kb_id = $1 GROUP BY label ORDER BY count(*) DESC, label`, kbID)
	if err != nil {
		return s, err
	}
	s.EntityType, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (LabelCount, error) {
		var l LabelCount
		err := row.Scan(&l.Label, &l.Count)
		return l, err
	})
	if s.EntityType == nil {
		s.EntityType = []LabelCount{}
	}
	return s, err
}

// RemoveFilesTx removes, in the caller's transaction, the mentions and
// extraction progress of the given files and then the entities and
// relations nothing else mentions (kb.GraphCleaner: a file deletion and its
// graph's commit together). It returns the vector ids of the removed
// entities and triples, whose vectors the caller deletes from the graph
// collection once the transaction committed.
func (p *Postgres) RemoveFilesTx(ctx context.Context, tx pgx.Tx, kbID string, fileIDs []string) ([]string, error) {
	if len(fileIDs) == 0 {
		return nil, nil
	}
	if err := lockKB(ctx, tx, kbID); err != nil {
		return nil, err
	}
	ents, rels, err := dropMentions(ctx, tx, kbID, `file_id = ANY($2)`, fileIDs)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM graph_chunk_extractions WHERE kb_id = $1 AND file_id = ANY($2)`, kbID, fileIDs); err != nil {
		return nil, err
	}
	return collect(ctx, tx, kbID, ents, rels)
}

// RemoveKBTx removes a knowledge base's whole graph, its extraction
// progress and extractor configuration in the caller's transaction
// (kb.GraphCleaner).
func (p *Postgres) RemoveKBTx(ctx context.Context, tx pgx.Tx, kbID string) error {
	if err := lockKB(ctx, tx, kbID); err != nil {
		return err
	}
	for _, t := range []string{"graph_entity_mentions", "graph_relation_mentions", "graph_relations", "graph_entities",
		"graph_chunk_extractions", "graph_extractor_configs"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+t+` WHERE kb_id = $1`, kbID); err != nil {
			return err
		}
	}
	return nil
}

// Settle implements settler: VACUUM (ANALYZE) of the graph tables, so that
// queries right after a build plan with statistics of the new rows and
// their index-only scans (hop, RankMentioned, ChunkEntities) read the
// visibility map instead of the heap. A fresh build leaves every page
// unmarked until autovacuum comes by, and a query then pays a heap fetch
// per index entry. VACUUM visits only pages changed since the last one;
// SKIP_LOCKED skips a table another VACUUM (or autovacuum) is processing.
func (p *Postgres) Settle(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `VACUUM (ANALYZE, SKIP_LOCKED) graph_entities, graph_relations, graph_entity_mentions, graph_relation_mentions`)
	return err
}
