package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// GenerateInput asks for a benchmark generated from a KB (the original's
// GenerateDatasetRequest, same fields, ranges and defaults).
type GenerateInput struct {
	Name             string `json:"name"`
	Description      string `json:"description"`
	Count            *int   `json:"count"`
	NeighborsCount   *int   `json:"neighbors_count"`
	ConcurrencyCount *int   `json:"concurrency_count"`
	LLMModelSpec     string `json:"llm_model_spec"`
	GenerationMode   string `json:"generation_mode"`
	GraphExpandTopK  *int   `json:"graph_expand_top_k"`
}

// GenerationParams are a generation's frozen parameters (build_metadata.params).
type GenerationParams struct {
	Count            int    `json:"count"`
	NeighborsCount   int    `json:"neighbors_count"`
	ConcurrencyCount int    `json:"concurrency_count"`
	LLMModelSpec     string `json:"llm_model_spec"`
	GenerationMode   string `json:"generation_mode"`
	GraphExpandTopK  int    `json:"graph_expand_top_k"`
}

// buildMeta is a generated dataset's build_metadata.
type buildMeta struct {
	Source   string           `json:"source"`
	Status   string           `json:"status"` // pending | running | completed | failed | cancelled
	Progress int              `json:"progress"`
	Message  string           `json:"message,omitempty"`
	TaskID   string           `json:"task_id,omitempty"`
	Params   GenerationParams `json:"params"`
	// CancelRequested: the task centre asked the generation to stop; it
	// stops at its next batch boundary (cancel.go).
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

func intIn(p *int, def, lo, hi int, name string) (int, error) {
	if p == nil {
		return def, nil
	}
	if *p < lo || *p > hi {
		return 0, failure.Invalid("invalid_"+name, "%s must be between %d and %d", name, lo, hi)
	}
	return *p, nil
}

// GenerationResult is the answer of generate and resume.
type GenerationResult struct {
	DatasetID string `json:"dataset_id"`
	TaskID    string `json:"task_id,omitempty"`
	Message   string `json:"message"`
}

// Generate creates a dataset of a KB sub may manage and starts its
// generation: anchor chunks drawn from the KB, each with up to
// neighbors_count neighbours found by vector search, turned by the model
// into a question and its answer (gold_chunk_ids: the anchor and its
// neighbours). The dataset row and the first batch's event commit together.
func (s *Service) Generate(ctx context.Context, sub access.Subject, kbID string, in GenerateInput) (GenerationResult, error) {
	if _, err := s.kbs.GetManaged(ctx, sub, kbID); err != nil {
		return GenerationResult{}, err
	}
	var p GenerationParams
	var err error
	if p.Count, err = intIn(in.Count, 10, 1, 100, "count"); err != nil {
		return GenerationResult{}, err
	}
	if p.NeighborsCount, err = intIn(in.NeighborsCount, 1, 0, 10, "neighbors_count"); err != nil {
		return GenerationResult{}, err
	}
	if p.ConcurrencyCount, err = intIn(in.ConcurrencyCount, 10, 1, 20, "concurrency_count"); err != nil {
		return GenerationResult{}, err
	}
	if p.GraphExpandTopK, err = intIn(in.GraphExpandTopK, 1, 1, 3, "graph_expand_top_k"); err != nil {
		return GenerationResult{}, err
	}
	p.LLMModelSpec = strings.TrimSpace(in.LLMModelSpec)
	if p.LLMModelSpec == "" {
		return GenerationResult{}, failure.Invalid("missing_llm_model_spec", "llm_model_spec is required")
	}
	p.GenerationMode = in.GenerationMode
	switch p.GenerationMode {
	case "", "vector":
		p.GenerationMode = "vector"
	case "graph_enhanced":
		return GenerationResult{}, failure.Invalid("graph_not_indexed", "当前知识库尚未完成图索引，无法使用图增强构建")
	default:
		return GenerationResult{}, failure.Invalid("invalid_generation_mode", "不支持的评估基准生成方式")
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = "自动生成评估数据集"
	}
	if utf8.RuneCountInString(name) > 100 {
		return GenerationResult{}, failure.Invalid("invalid_name", "name is longer than 100 characters")
	}
	id := newID("dataset_", 4)
	task := "task_" + strings.TrimPrefix(id, "dataset_") + "_0"
	meta, _ := json.Marshal(buildMeta{Source: "generated", Status: "pending", TaskID: task, Params: p})
	err = s.ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		if _, err := tx.Exec(ctx, `INSERT INTO evaluation_datasets (dataset_id, kb_id, name, description, has_gold_chunks,
			has_gold_answers, build_metadata, created_by) VALUES ($1,$2,$3,$4,true,true,$5,$6)`, id, kbID, name, in.Description, meta, sub.UID); err != nil {
			return err
		}
		return emit(genEvent(id, 0, 0))
	})
	if err != nil {
		return GenerationResult{}, err
	}
	return GenerationResult{DatasetID: id, TaskID: task, Message: "评估数据集生成任务已提交"}, nil
}

func genEvent(datasetID string, batch, attempt int) outbox.Pending {
	return outbox.Pending{Payload: events.DatasetBatchReady{DatasetID: datasetID, Batch: batch},
		DedupeKey: fmt.Sprintf("dataset-batch:%s:%d:%d", datasetID, attempt, batch)}
}

// Resume continues a generated dataset of kbID: a completed or still
// running generation is left alone (concurrent resumes of a failed one
// share the one job the first of them starts: the same task_id).
func (s *Service) Resume(ctx context.Context, sub access.Subject, kbID, datasetID string) (GenerationResult, error) {
	if _, err := s.kbs.GetManaged(ctx, sub, kbID); err != nil {
		return GenerationResult{}, err
	}
	var out GenerationResult
	err := s.ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		// The row lock serialises concurrent resumes: the second sees the
		// first one's pending job.
		var raw []byte
		var attempt, items int
		err := tx.QueryRow(ctx, `SELECT build_metadata, generation_attempt,
			(SELECT count(*) FROM evaluation_dataset_items i WHERE i.dataset_id = d.dataset_id)
			FROM evaluation_datasets d WHERE dataset_id = $1 AND kb_id = $2 FOR UPDATE`, datasetID, kbID).Scan(&raw, &attempt, &items)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrDatasetNotFound
		}
		if err != nil {
			return err
		}
		var m buildMeta
		_ = json.Unmarshal(raw, &m)
		if m.Source != "generated" {
			return failure.Invalid("not_generated", "只能恢复自动生成的数据集")
		}
		out = GenerationResult{DatasetID: datasetID, TaskID: m.TaskID}
		switch m.Status {
		case "completed":
			out.Message = "数据集已完成生成"
			return nil
		case "pending", "running":
			out.Message = "已有进行中的生成任务"
			return nil
		}
		attempt++
		m.Status, m.Message, m.CancelRequested = "pending", "恢复生成中", false
		m.TaskID = fmt.Sprintf("task_%s_%d", strings.TrimPrefix(datasetID, "dataset_"), attempt)
		m.Progress = 99 * items / max(m.Params.Count, 1)
		nm, _ := json.Marshal(m)
		// The resumed job walks the slots again from the first batch and
		// fills only the slots without an item.
		if _, err := tx.Exec(ctx, `UPDATE evaluation_datasets SET build_metadata = $2, generation_attempt = $3, generation_batch = 0,
			updated_at = now() WHERE dataset_id = $1`, datasetID, nm, attempt); err != nil {
			return err
		}
		out.TaskID, out.Message = m.TaskID, "评估数据集生成任务已恢复"
		return emit(genEvent(datasetID, 0, attempt))
	})
	return out, err
}

// genItem is one generated question.
type genItem struct {
	slot   int
	query  string
	answer string
	gold   []string
}

// GenerateBatch generates batch batch of a dataset: concurrency_count anchor
// slots, each a model call, then commits the items (item_index = slot), the
// progress and the next batch's event, or completes the dataset. A batch
// that is not the generation's next, or a generation not pending/running,
// is a no-op. A slot whose model answer is unusable yields no item.
func (s *Service) GenerateBatch(ctx context.Context, datasetID string, batch int) error {
	var raw []byte
	var kbID string
	var next int
	err := s.pool.QueryRow(ctx, `SELECT kb_id, build_metadata, generation_batch FROM evaluation_datasets WHERE dataset_id = $1`,
		datasetID).Scan(&kbID, &raw, &next)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var m buildMeta
	_ = json.Unmarshal(raw, &m)
	if m.Source != "generated" || (m.Status != "pending" && m.Status != "running") || next != batch {
		return nil
	}
	if m.CancelRequested {
		return s.stopGeneration(ctx, datasetID, batch)
	}
	p := m.Params
	size := p.ConcurrencyCount
	from := batch * size
	slots := max(0, min(size, p.Count-from))
	rows, err := s.pool.Query(ctx, `SELECT item_index FROM evaluation_dataset_items WHERE dataset_id = $1 AND item_index >= $2 AND item_index < $3`,
		datasetID, from, from+slots)
	if err != nil {
		return err
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return err
	}
	var missing []int
	for i := from; i < from+slots; i++ {
		if !slices.Contains(have, i) {
			missing = append(missing, i)
		}
	}
	items, err := s.generateSlots(ctx, kbID, datasetID, p, missing)
	if fe, coded := failure.As(err); coded {
		return s.failGeneration(ctx, datasetID, fe.Message)
	}
	if err != nil {
		return err
	}
	s.crash("evaluate.dataset_batch_generated")
	return s.ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		// The row lock taken here orders this commit with a cancel: a cancel
		// that arrived during the batch is read back (cancel.go).
		var cancelled bool
		err := tx.QueryRow(ctx, `UPDATE evaluation_datasets SET generation_batch = $3, updated_at = now()
			WHERE dataset_id = $1 AND generation_batch = $2 AND build_metadata->>'status' IN ('pending', 'running')
			RETURNING coalesce((build_metadata->>'cancel_requested')::boolean, false)`, datasetID, batch, batch+1).Scan(&cancelled)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var rows []Item
		for _, it := range items {
			a := it.answer
			rows = append(rows, Item{ItemIndex: it.slot, Query: it.query, GoldChunkIDs: it.gold, GoldAnswer: &a})
		}
		if len(rows) > 0 {
			if err := insertItems(ctx, tx, datasetID, kbID, rows); err != nil { // slots without an item only: no conflict
				return err
			}
		}
		var count int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM evaluation_dataset_items WHERE dataset_id = $1`, datasetID).Scan(&count); err != nil {
			return err
		}
		done := from+slots >= p.Count
		m.Status, m.Progress, m.Message = "running", 99*(from+slots)/p.Count, fmt.Sprintf("已生成 %d/%d", count, p.Count)
		if done {
			m.Status, m.Progress, m.Message = "completed", 100, "完成"
			if count == 0 {
				m.Status, m.Message = "failed", "未生成新的有效评估题目"
			}
		}
		if cancelled && !done {
			m.Status, m.Message, m.CancelRequested = "cancelled", fmt.Sprintf("已取消（已生成 %d/%d）", count, p.Count), true
		}
		nm, _ := json.Marshal(m)
		if _, err := tx.Exec(ctx, `UPDATE evaluation_datasets SET build_metadata = $2, item_count = $3 WHERE dataset_id = $1`,
			datasetID, nm, count); err != nil {
			return err
		}
		if done || cancelled {
			return nil
		}
		var attempt int
		if err := tx.QueryRow(ctx, `SELECT generation_attempt FROM evaluation_datasets WHERE dataset_id = $1`, datasetID).Scan(&attempt); err != nil {
			return err
		}
		return emit(genEvent(datasetID, batch+1, attempt))
	})
}

func (s *Service) failGeneration(ctx context.Context, datasetID, msg string) error {
	_, err := s.pool.Exec(ctx, `UPDATE evaluation_datasets SET build_metadata = build_metadata ||
		jsonb_build_object('status', 'failed', 'message', $2::text, 'error_message', $2::text), updated_at = now()
		WHERE dataset_id = $1`, datasetID, msg)
	return err
}

// generateSlots writes the questions of the slots, all at once.
func (s *Service) generateSlots(ctx context.Context, kbID, datasetID string, p GenerationParams, slots []int) ([]genItem, error) {
	n := len(slots)
	if n == 0 {
		return nil, nil
	}
	k, err := s.kbs.Load(ctx, kbID)
	if err != nil {
		return nil, err
	}
	model, _, err := s.models.ChatModel(p.LLMModelSpec)
	if err != nil {
		return nil, failure.Invalid("invalid_llm_model_spec", "llm_model_spec %s: %v", p.LLMModelSpec, err)
	}
	_, total, err := s.kbs.SampleChunks(ctx, kbID, datasetID, 0, 0)
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, failure.Invalid("no_chunks", "知识库为空或未解析到chunks")
	}
	// Slot i takes the (i mod total)-th chunk of the dataset's draw.
	anchors := make([]kb.SampledChunk, n)
	for i := 0; i < n; i++ {
		c, _, err := s.kbs.SampleChunks(ctx, kbID, datasetID, slots[i]%total, 1)
		if err != nil {
			return nil, err
		}
		anchors[i] = c[0]
	}
	out := make([]*genItem, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range anchors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = s.generateOne(ctx, k, model, p, slots[i], anchors[i])
		}()
	}
	wg.Wait()
	var items []genItem
	for i, it := range out {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if it != nil {
			items = append(items, *it)
		}
	}
	return items, nil
}

const generatePrompt = `请根据以下知识库片段，编写一个只能依据这些片段回答的问题，并给出简洁准确的答案。

%s

只输出一个 JSON 对象，不要输出其他内容：{"query": "问题", "answer": "答案"}`

// generateOne turns an anchor and its neighbours into a question. A
// retrieval error is returned (the batch is redone); an unusable model
// answer yields nil (the slot has no item).
func (s *Service) generateOne(ctx context.Context, k kb.KB, model llm.ChatModel, p GenerationParams, slot int, anchor kb.SampledChunk) (*genItem, error) {
	gold := []string{anchor.ChunkID}
	passages := []string{anchor.Content}
	if p.NeighborsCount > 0 {
		opt := k.Retrieval()
		opt.SearchMode, opt.FinalTopK, opt.SimilarityThreshold, opt.UseReranker = "vector", p.NeighborsCount+3, 0, false
		q := anchor.Content
		if len(q) > 4000 {
			q = strings.ToValidUTF8(q[:4000], "")
		}
		res, err := s.ret.Query(ctx, k, q, opt, "")
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			if len(gold) > p.NeighborsCount || r.ID == anchor.ChunkID {
				continue
			}
			gold = append(gold, r.ID)
			passages = append(passages, r.Content)
		}
	}
	var b strings.Builder
	for i, t := range passages {
		fmt.Fprintf(&b, "[片段%d]\n%s\n\n", i+1, t)
	}
	text, err := complete(ctx, model, fmt.Sprintf(generatePrompt, strings.TrimSpace(b.String())))
	if err != nil {
		s.log.Warn("benchmark generation", "slot", slot, "error", err)
		return nil, nil
	}
	var qa struct {
		Query  string `json:"query"`
		Answer string `json:"answer"`
	}
	if err := json.Unmarshal([]byte(jsonObject(text)), &qa); err != nil || strings.TrimSpace(qa.Query) == "" {
		s.log.Warn("benchmark generation: unusable answer", "slot", slot, "reply", text)
		return nil, nil
	}
	return &genItem{slot: slot, query: strings.TrimSpace(qa.Query), answer: strings.TrimSpace(qa.Answer), gold: gold}, nil
}

// jsonObject strips a ``` fence and surrounding prose from a model's JSON reply.
func jsonObject(text string) string {
	s := strings.TrimSpace(text)
	if m := fence.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	if i, j := strings.Index(s, "{"), strings.LastIndex(s, "}"); i >= 0 && j > i {
		s = s[i : j+1]
	}
	return s
}
