package kbconnect

import (
	"context"
	"net/http"
	"net/url"
)

// difyMethod maps the KB's search mode to Dify's search_method.
func difyMethod(mode string) string {
	switch mode {
	case "keyword":
		return "full_text_search"
	case "hybrid":
		return "hybrid_search"
	}
	return "semantic_search"
}

type difyAnswer struct {
	Records []struct {
		Segment struct {
			ID         string `json:"id"`
			Content    string `json:"content"`
			DocumentID string `json:"document_id"`
			Position   int    `json:"position"`
			Document   struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"document"`
		} `json:"segment"`
		Score float64 `json:"score"`
	} `json:"records"`
}

// dify calls POST {dify_api_url}/datasets/{dify_dataset_id}/retrieve.
func (c *Client) dify(ctx context.Context, src Source, query string, opt Options) ([]Hit, error) {
	endpoint := src.param("dify_api_url") + "/datasets/" + url.PathEscape(src.param("dify_dataset_id")) + "/retrieve"
	rm := map[string]any{
		"search_method":           difyMethod(opt.SearchMode),
		"reranking_enable":        false,
		"top_k":                   opt.TopK,
		"score_threshold_enabled": opt.ScoreThreshold > 0,
	}
	if opt.ScoreThreshold > 0 {
		rm["score_threshold"] = opt.ScoreThreshold
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+src.Secret)
	var ans difyAnswer
	if err := c.call(ctx, Dify, http.MethodPost, endpoint, h, map[string]any{"query": query, "retrieval_model": rm}, &ans); err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(ans.Records))
	for _, r := range ans.Records {
		s := r.Segment
		docID := s.Document.ID
		if docID == "" {
			docID = s.DocumentID
		}
		out = append(out, Hit{ID: s.ID, Content: s.Content, DocumentID: docID, DocumentName: s.Document.Name, Score: r.Score,
			Metadata: map[string]any{"source": s.Document.Name, "position": s.Position}})
	}
	if len(out) > opt.TopK {
		out = out[:opt.TopK]
	}
	return out, nil
}
