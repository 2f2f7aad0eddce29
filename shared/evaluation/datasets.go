package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// Dataset is a benchmark dataset (the original's dataset dict).
type Dataset struct {
	ID             string          `json:"id"`
	DatasetID      string          `json:"dataset_id"`
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	KBID           string          `json:"kb_id"`
	ItemCount      int             `json:"item_count"`
	HasGoldChunks  bool            `json:"has_gold_chunks"`
	HasGoldAnswers bool            `json:"has_gold_answers"`
	BuildMetadata  json.RawMessage `json:"build_metadata"`
	CreatedBy      string          `json:"created_by"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

// Ready reports whether the dataset can be read and run: uploads are; a
// generated dataset once its generation completed.
func (d Dataset) Ready() bool {
	var m struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(d.BuildMetadata, &m)
	return m.Status == "" || m.Status == "completed"
}

// Item is one benchmark question.
type Item struct {
	ItemID       string   `json:"item_id"`
	ItemIndex    int      `json:"item_index"`
	Query        string   `json:"query"`
	GoldChunkIDs []string `json:"gold_chunk_ids"`
	GoldAnswer   *string  `json:"gold_answer"`
}

// Pagination is the original's page block of a dataset's items.
type Pagination struct {
	CurrentPage int  `json:"current_page"`
	PageSize    int  `json:"page_size"`
	TotalItems  int  `json:"total_items"`
	TotalPages  int  `json:"total_pages"`
	HasNext     bool `json:"has_next"`
	HasPrev     bool `json:"has_prev"`
}

// DatasetPage is a dataset with one page of its items.
type DatasetPage struct {
	Dataset
	Items      []Item     `json:"items"`
	Pagination Pagination `json:"pagination"`
}

const datasetCols = `dataset_id, name, description, kb_id, item_count, has_gold_chunks, has_gold_answers, build_metadata, created_by, created_at, updated_at`

func scanDataset(row pgx.Row) (Dataset, error) {
	var d Dataset
	err := row.Scan(&d.DatasetID, &d.Name, &d.Description, &d.KBID, &d.ItemCount, &d.HasGoldChunks, &d.HasGoldAnswers,
		&d.BuildMetadata, &d.CreatedBy, &d.CreatedAt, &d.UpdatedAt)
	d.ID = d.DatasetID
	return d, err
}

// benchmarkLine is one JSONL line of a benchmark.
type benchmarkLine struct {
	Query        *string         `json:"query"`
	GoldChunkIDs json.RawMessage `json:"gold_chunk_ids"`
	GoldAnswer   json.RawMessage `json:"gold_answer"`
}

// MaxItems bounds a dataset's items.
const MaxItems = 100000

// ParseJSONL reads a benchmark: one JSON object a line with query (required;
// "第N行缺少必需的'query'字段" otherwise, N counting from 1 like the
// original), optional gold_chunk_ids (a list of ids) and gold_answer (a
// string). Blank lines are skipped. It reports whether any line had gold
// chunks or a gold answer.
func ParseJSONL(content []byte) (items []Item, hasGoldChunks, hasGoldAnswers bool, err error) {
	if !utf8.Valid(content) {
		return nil, false, false, failure.Invalid("invalid_jsonl", "the file is not UTF-8 text")
	}
	lines := strings.Split(strings.TrimSpace(string(content)), "\n")
	for n, line := range lines {
		num := n + 1
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var l benchmarkLine
		dec := json.NewDecoder(strings.NewReader(line))
		if err := dec.Decode(&l); err != nil {
			return nil, false, false, failure.Invalid("invalid_jsonl", "第%d行JSON格式错误: %v", num, err).With(map[string]any{"line": num})
		}
		if l.Query == nil {
			return nil, false, false, failure.Invalid("missing_query", "第%d行缺少必需的'query'字段", num).With(map[string]any{"line": num})
		}
		it := Item{ItemIndex: len(items), Query: *l.Query, GoldChunkIDs: []string{}}
		if strings.TrimSpace(it.Query) == "" {
			return nil, false, false, failure.Invalid("missing_query", "第%d行的'query'字段为空", num).With(map[string]any{"line": num})
		}
		if len(l.GoldChunkIDs) > 0 && string(l.GoldChunkIDs) != "null" {
			if err := json.Unmarshal(l.GoldChunkIDs, &it.GoldChunkIDs); err != nil {
				return nil, false, false, failure.Invalid("invalid_jsonl", "第%d行的'gold_chunk_ids'必须是字符串列表", num).With(map[string]any{"line": num})
			}
		}
		if len(l.GoldAnswer) > 0 && string(l.GoldAnswer) != "null" {
			var a string
			if err := json.Unmarshal(l.GoldAnswer, &a); err != nil {
				return nil, false, false, failure.Invalid("invalid_jsonl", "第%d行的'gold_answer'必须是字符串", num).With(map[string]any{"line": num})
			}
			if a != "" {
				it.GoldAnswer = &a
			}
		}
		hasGoldChunks = hasGoldChunks || len(it.GoldChunkIDs) > 0
		hasGoldAnswers = hasGoldAnswers || it.GoldAnswer != nil
		items = append(items, it)
		if len(items) > MaxItems {
			return nil, false, false, failure.Invalid("too_many_items", "a dataset holds at most %d items", MaxItems)
		}
	}
	if len(items) == 0 {
		return nil, false, false, failure.Invalid("empty_dataset", "文件中没有有效的问题数据")
	}
	return items, hasGoldChunks, hasGoldAnswers, nil
}

// UploadInput is an uploaded benchmark.
type UploadInput struct {
	Filename    string
	Name        string
	Description string
	Content     []byte
}

// Upload stores a JSONL benchmark as a dataset of a KB sub may manage;
// read (the request body) is called only once access is granted.
func (s *Service) Upload(ctx context.Context, sub access.Subject, kbID string, read func() (UploadInput, error)) (Dataset, error) {
	if _, err := s.kbs.GetManaged(ctx, sub, kbID); err != nil {
		return Dataset{}, err
	}
	in, err := read()
	if err != nil {
		return Dataset{}, err
	}
	if !strings.HasSuffix(in.Filename, ".jsonl") {
		return Dataset{}, failure.Invalid("unsupported_file_type", "仅支持JSONL格式文件")
	}
	items, hasChunks, hasAnswers, err := ParseJSONL(in.Content)
	if err != nil {
		return Dataset{}, err
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = in.Filename
	}
	if utf8.RuneCountInString(name) > 200 {
		return Dataset{}, failure.Invalid("invalid_name", "name is longer than 200 characters")
	}
	meta, _ := json.Marshal(map[string]any{"source": "upload", "status": "completed", "progress": 100, "filename": in.Filename})
	id := newID("dataset_", 4)
	var d Dataset
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		d, err = scanDataset(tx.QueryRow(ctx, `INSERT INTO evaluation_datasets (dataset_id, kb_id, name, description, item_count,
			has_gold_chunks, has_gold_answers, build_metadata, created_by) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) RETURNING `+datasetCols,
			id, kbID, name, in.Description, len(items), hasChunks, hasAnswers, meta, sub.UID))
		if err != nil {
			return err
		}
		return insertItems(ctx, tx, id, kbID, items)
	})
	return d, err
}

// insertItems copies items (their ItemIndex set) into the dataset.
func insertItems(ctx context.Context, tx pgx.Tx, datasetID, kbID string, items []Item) error {
	rows := make([][]any, len(items))
	for i, it := range items {
		gold, _ := json.Marshal(it.GoldChunkIDs)
		rows[i] = []any{newID("dataset_item_", 6), datasetID, kbID, it.ItemIndex, it.Query, gold, it.GoldAnswer}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"evaluation_dataset_items"},
		[]string{"item_id", "dataset_id", "kb_id", "item_index", "query_text", "gold_chunk_ids", "gold_answer"}, pgx.CopyFromRows(rows))
	return err
}

// Datasets lists a KB's datasets, newest first.
func (s *Service) Datasets(ctx context.Context, sub access.Subject, kbID string) ([]Dataset, error) {
	if _, err := s.kbs.Get(ctx, sub, kbID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+datasetCols+` FROM evaluation_datasets WHERE kb_id = $1 ORDER BY created_at DESC, id DESC`, kbID)
	if err != nil {
		return nil, err
	}
	out := []Dataset{}
	for rows.Next() {
		d, err := scanDataset(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// dataset loads dataset id of KB kbID ("" = any KB).
func (s *Service) dataset(ctx context.Context, db pgx.Tx, id, kbID string) (Dataset, error) {
	var row pgx.Row
	q := `SELECT ` + datasetCols + ` FROM evaluation_datasets WHERE dataset_id = $1 AND ($2 = '' OR kb_id = $2)`
	if db != nil {
		row = db.QueryRow(ctx, q, id, kbID)
	} else {
		row = s.pool.QueryRow(ctx, q, id, kbID)
	}
	d, err := scanDataset(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return Dataset{}, ErrDatasetNotFound
	}
	return d, err
}

// datasetWithAccess loads a dataset and checks sub's access to its KB
// (manage when manage is set). A dataset of a KB sub cannot read is not found.
func (s *Service) datasetWithAccess(ctx context.Context, sub access.Subject, id string, manage bool) (Dataset, error) {
	d, err := s.dataset(ctx, nil, id, "")
	if err != nil {
		return Dataset{}, err
	}
	if manage {
		_, err = s.kbs.GetManaged(ctx, sub, d.KBID)
	} else {
		_, err = s.kbs.Get(ctx, sub, d.KBID)
	}
	if errors.Is(err, kb.ErrNotFound) {
		return Dataset{}, ErrDatasetNotFound
	}
	return d, err
}

// CheckPage validates page and page size (1…100).
func CheckPage(page, size int) error {
	if page < 1 {
		return failure.Invalid("invalid_page", "页码必须大于0")
	}
	if size < 1 || size > 100 {
		return failure.Invalid("invalid_page_size", "每页大小必须在1-100之间")
	}
	return nil
}

// DatasetDetail returns a ready dataset of kbID with page page of its items.
func (s *Service) DatasetDetail(ctx context.Context, sub access.Subject, kbID, datasetID string, page, size int) (DatasetPage, error) {
	if err := CheckPage(page, size); err != nil {
		return DatasetPage{}, err
	}
	if _, err := s.kbs.Get(ctx, sub, kbID); err != nil {
		return DatasetPage{}, err
	}
	d, err := s.dataset(ctx, nil, datasetID, kbID)
	if err != nil {
		return DatasetPage{}, err
	}
	if !d.Ready() {
		return DatasetPage{}, ErrDatasetNotReady
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM evaluation_dataset_items WHERE dataset_id = $1`, datasetID).Scan(&total); err != nil {
		return DatasetPage{}, err
	}
	items, err := s.items(ctx, datasetID, (page-1)*size, size)
	if err != nil {
		return DatasetPage{}, err
	}
	pages := (total + size - 1) / size
	return DatasetPage{Dataset: d, Items: items, Pagination: Pagination{CurrentPage: page, PageSize: size, TotalItems: total,
		TotalPages: pages, HasNext: page < pages, HasPrev: page > 1}}, nil
}

// items reads limit items of a dataset from item index offset on (limit < 0: all).
func (s *Service) items(ctx context.Context, datasetID string, offset, limit int) ([]Item, error) {
	q := `SELECT item_id, item_index, query_text, gold_chunk_ids, gold_answer FROM evaluation_dataset_items
		WHERE dataset_id = $1 ORDER BY item_index OFFSET $2`
	args := []any{datasetID, offset}
	if limit >= 0 {
		q += ` LIMIT $3`
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Item, error) {
		var it Item
		err := r.Scan(&it.ItemID, &it.ItemIndex, &it.Query, &it.GoldChunkIDs, &it.GoldAnswer)
		if it.GoldChunkIDs == nil {
			it.GoldChunkIDs = []string{}
		}
		return it, err
	})
}

var unsafeName = regexp.MustCompile(`[\\/:*?"<>|]+`)

// Export returns a ready dataset as JSONL (query, and gold_chunk_ids and
// gold_answer when not empty) with a safe file name.
func (s *Service) Export(ctx context.Context, sub access.Subject, datasetID string) (filename string, content []byte, err error) {
	d, err := s.datasetWithAccess(ctx, sub, datasetID, false)
	if err != nil {
		return "", nil, err
	}
	if !d.Ready() {
		return "", nil, ErrDatasetNotReady
	}
	items, err := s.items(ctx, datasetID, 0, -1)
	if err != nil {
		return "", nil, err
	}
	var b bytes.Buffer
	for _, it := range items {
		line := map[string]any{"query": it.Query}
		if len(it.GoldChunkIDs) > 0 {
			line["gold_chunk_ids"] = it.GoldChunkIDs
		}
		if it.GoldAnswer != nil && *it.GoldAnswer != "" {
			line["gold_answer"] = *it.GoldAnswer
		}
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(orderedLine(line)); err != nil {
			return "", nil, err
		}
	}
	name := strings.TrimSpace(unsafeName.ReplaceAllString(strings.TrimSpace(d.Name), "_"))
	if name == "" || name == "." || name == ".." {
		name = d.DatasetID
	}
	if !strings.HasSuffix(name, ".jsonl") {
		name += ".jsonl"
	}
	return name, b.Bytes(), nil
}

// orderedLine writes query, gold_chunk_ids, gold_answer in that order.
type orderedLine map[string]any

func (l orderedLine) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, k := range []string{"query", "gold_chunk_ids", "gold_answer"} {
		v, ok := l[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		var vb bytes.Buffer
		enc := json.NewEncoder(&vb)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%q:%s", k, bytes.TrimSpace(vb.Bytes()))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// DeleteDataset deletes a dataset of a KB sub may manage, with its items.
// Runs of the dataset stay (with their per-item results).
func (s *Service) DeleteDataset(ctx context.Context, sub access.Subject, datasetID string) error {
	if _, err := s.datasetWithAccess(ctx, sub, datasetID, true); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM evaluation_datasets WHERE dataset_id = $1`, datasetID)
	return err
}
