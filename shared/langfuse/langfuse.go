// Package langfuse is the small part of Langfuse's public HTTP API that
// agent evaluation suites use (Basic auth with the public and secret keys):
// GET /api/public/dataset-items?datasetName=…&page=…&limit=… to read a
// dataset's items, POST /api/public/ingestion (trace-create and
// score-create events) to record each result as a trace with scores, and
// POST /api/public/dataset-run-items to link the trace to its dataset item
// in an experiment (a dataset run named after the suite run). Ids are
// derived from the suite run and item, so writing a batch again (a redone
// batch) updates the same trace, scores and run items instead of adding
// new ones.
//
// Imported by: shared/bootstrap/knowledge (built when LANGFUSE_* is set).
// May import: shared/evaluation, shared/failure.
package langfuse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Client calls one Langfuse project.
type Client struct {
	BaseURL, PublicKey, SecretKey string
	// HTTP is the client (default: 30 s timeout). The base URL is the
	// operator's configuration, not a user's, so it is not SSRF-guarded.
	HTTP *http.Client
}

// New returns a client, or nil when any of the three settings is missing.
func New(baseURL, publicKey, secretKey string) *Client {
	if baseURL == "" || publicKey == "" || secretKey == "" {
		return nil
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), PublicKey: publicKey, SecretKey: secretKey,
		HTTP: &http.Client{Timeout: 30 * time.Second}}
}

func (c *Client) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.PublicKey, c.SecretKey)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("langfuse %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return failure.Unprocessable("langfuse_not_found", "langfuse %s %s: not found", method, path)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return failure.Unprocessable("langfuse_unauthorized", "langfuse refused the LANGFUSE_* keys (%d)", resp.StatusCode)
	case resp.StatusCode >= 300:
		return fmt.Errorf("langfuse %s %s: %d %s", method, path, resp.StatusCode, truncate(string(data), 300))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("langfuse %s %s: %w", method, path, err)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

type datasetItem struct {
	ID             string          `json:"id"`
	Status         string          `json:"status"`
	Input          json.RawMessage `json:"input"`
	ExpectedOutput json.RawMessage `json:"expectedOutput"`
}

// DatasetItems reads the dataset's active items, 100 a page. The task text
// is the input when it is a string, else its input, query, question or
// prompt field (as the original CLI); an item with neither is skipped.
func (c *Client) DatasetItems(ctx context.Context, dataset string) ([]evaluation.SuiteItem, error) {
	var out []evaluation.SuiteItem
	for page := 1; ; page++ {
		var resp struct {
			Data []datasetItem `json:"data"`
			Meta struct {
				TotalPages int `json:"totalPages"`
			} `json:"meta"`
		}
		q := url.Values{"datasetName": {dataset}, "page": {fmt.Sprint(page)}, "limit": {"100"}}
		if err := c.do(ctx, http.MethodGet, "/api/public/dataset-items?"+q.Encode(), nil, &resp); err != nil {
			return nil, err
		}
		for _, it := range resp.Data {
			if it.Status != "" && it.Status != "ACTIVE" {
				continue
			}
			text := TaskText(it.Input)
			if text == "" {
				continue
			}
			si := evaluation.SuiteItem{Input: text, LangfuseItemID: it.ID}
			if exp := TaskText(it.ExpectedOutput); exp != "" {
				si.ExpectedOutput = &exp
			} else if len(it.ExpectedOutput) > 0 && string(it.ExpectedOutput) != "null" {
				e := string(it.ExpectedOutput)
				si.ExpectedOutput = &e
			}
			out = append(out, si)
		}
		if len(resp.Data) == 0 || page >= resp.Meta.TotalPages {
			return out, nil
		}
	}
}

// TaskText is a dataset field as text: a string, or the input, query,
// question, prompt (or output, for expected outputs) field of an object.
func TaskText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, k := range []string{"input", "query", "question", "prompt", "output", "answer"} {
		if v, ok := m[k]; ok && json.Unmarshal(v, &s) == nil && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// DeriveID is a stable id for a Langfuse object of a suite run's item.
func DeriveID(kind, runID string, index int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s:%s:%d", kind, runID, index))
	return hex.EncodeToString(sum[:16])
}

type ingestion struct {
	Batch []ingestionEvent `json:"batch"`
}

type ingestionEvent struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Body      any    `json:"body"`
}

// WriteBack records e's items that came from the dataset: a trace per item
// (input, output, the trajectory as metadata, tags agent_evaluation), the
// scores passed (0/1) and judge_score, and the dataset run item linking the
// trace to its dataset item under the run name.
func (c *Client) WriteBack(ctx context.Context, e evaluation.Experiment) error {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var batch []ingestionEvent
	type link struct{ item, trace string }
	var links []link
	for _, it := range e.Items {
		if it.LangfuseItemID() == "" {
			continue
		}
		trace := DeriveID("trace", e.RunID, it.ItemIndex)
		meta := map[string]any{"source": "agent_evaluation", "suite_run_id": e.RunID, "status": it.Status,
			"agent_run_id": it.AgentRunID, "trajectory_summary": it.Trajectory, "checks": it.Checks,
			"evaluation_dataset_name": e.Dataset, "evaluation_dataset_item_id": it.LangfuseItemID(), "evaluation_experiment_name": e.RunName}
		batch = append(batch, ingestionEvent{ID: DeriveID("trace-event", e.RunID, it.ItemIndex), Timestamp: now, Type: "trace-create",
			Body: map[string]any{"id": trace, "name": "agent-evaluation:" + e.AgentSlug, "input": it.Input, "output": it.Output,
				"metadata": meta, "tags": []string{"agent_evaluation", "yuxi"}}})
		passed := 0.0
		if it.Passed {
			passed = 1
		}
		batch = append(batch, ingestionEvent{ID: DeriveID("score-event-passed", e.RunID, it.ItemIndex), Timestamp: now, Type: "score-create",
			Body: map[string]any{"id": DeriveID("score-passed", e.RunID, it.ItemIndex), "traceId": trace, "name": "passed", "value": passed}})
		if it.JudgeScore != nil {
			batch = append(batch, ingestionEvent{ID: DeriveID("score-event-judge", e.RunID, it.ItemIndex), Timestamp: now, Type: "score-create",
				Body: map[string]any{"id": DeriveID("score-judge", e.RunID, it.ItemIndex), "traceId": trace, "name": "judge_score", "value": *it.JudgeScore}})
		}
		links = append(links, link{item: it.LangfuseItemID(), trace: trace})
	}
	if len(batch) == 0 {
		return nil
	}
	var res struct {
		Errors []struct {
			ID      string `json:"id"`
			Status  int    `json:"status"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := c.do(ctx, http.MethodPost, "/api/public/ingestion", ingestion{Batch: batch}, &res); err != nil {
		return err
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("langfuse ingestion: %d events refused (first: %d %s)", len(res.Errors), res.Errors[0].Status, res.Errors[0].Message)
	}
	for _, l := range links {
		body := map[string]any{"runName": e.RunName, "runDescription": "Yuxi agent evaluation of " + e.AgentSlug,
			"metadata": map[string]any{"suite_run_id": e.RunID, "agent_slug": e.AgentSlug}, "datasetItemId": l.item, "traceId": l.trace}
		if err := c.do(ctx, http.MethodPost, "/api/public/dataset-run-items", body, nil); err != nil {
			return err
		}
	}
	return nil
}
