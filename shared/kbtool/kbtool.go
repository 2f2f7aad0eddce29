// Package kbtool is the agent's knowledge-base tools: list_kbs, get_mindmap, query_kb,
// find_kb_document, open_kb_document, search_file and download_kb_file (spec §4.5: argument
// schemas, line numbering and window semantics as the original). A tool sees
// only the knowledge bases that are both readable by the run's user and
// enabled for the run's agent (context.knowledges; empty = all readable),
// re-checked at every call. Results cite kb_id, file_id and chunk ids.
//
// The tools' names, descriptions and argument schemas live in kbspec, which
// a process that only offers the tools to the model links instead.
//
// Imported by: the tool registry wiring (bootstrap/knowledge). May import:
// shared/kb, shared/kbtool/kbspec, shared/mindmap, shared/tool, shared/access,
// shared/postgres, shared/failure, pgx.
package kbtool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kbtool/kbspec"
	"github.com/yuxi-serverless/yuxi/shared/mindmap"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Deps are what the tools need.
type Deps struct {
	Pool      *pgxpool.Pool
	KBs       *kb.Store
	Retriever *kb.Retriever
	// Mindmaps renders mind maps (get_mindmap; nil: it answers "unavailable").
	Mindmaps *mindmap.Service
	// ReadMarkdown returns the Markdown stored under key.
	ReadMarkdown func(ctx context.Context, key string) (string, error)
	// ReadObject returns a stored original (at most max bytes; more is a
	// coded failure) and Outputs saves into the run's sandbox outputs, for
	// download_kb_file; nil: the tool answers that no sandbox is configured.
	ReadObject func(ctx context.Context, key string, max int64) ([]byte, error)
	Outputs    Outputs
}

// Tools returns the six knowledge tools.
func Tools(d Deps) []tool.Tool {
	return []tool.Tool{listKBs{d}, getMindmap{d}, queryKB{d}, findDocument{d}, openDocument{d}, searchFile{d}, downloadFile{d}}
}

type getMindmap struct{ d Deps }

func (getMindmap) Spec() tool.Spec { return kbspec.GetMindmap() }

// Invoke finds the knowledge base by name among those in scope.
func (t getMindmap) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	return run(ctx, t.d, c, func(sc scope, a struct {
		KBName string `json:"kb_name"`
	}) (any, error) {
		if t.d.Mindmaps == nil {
			return nil, failure.NotFound("mindmap_unavailable", "mind maps are not available here")
		}
		kbs, err := sc.visible(ctx, t.d)
		if err != nil {
			return nil, err
		}
		for _, k := range kbs {
			if k.Name == strings.TrimSpace(a.KBName) {
				return t.d.Mindmaps.ForAgent(ctx, k)
			}
		}
		return nil, failure.NotFound("kb_not_available", "知识库 '%s' 不存在或当前会话未启用", a.KBName)
	})
}

// scope is who calls, and which KBs the run's agent may use.
type scope struct {
	sub     access.Subject
	allowed []string // nil: every readable KB
}

// scopeOf loads the run's user and the agent's knowledge selection (frozen in
// the run when it was submitted) — at the point of effect.
func scopeOf(ctx context.Context, d Deps, c tool.Call) (scope, error) {
	var sc scope
	var knowledges []byte
	err := d.Pool.QueryRow(ctx, `SELECT u.uid, u.role, u.department_id, r.input_payload->'context'->'knowledges'
		FROM agent_runs r JOIN users u ON u.uid = r.uid AND NOT u.is_deleted
		WHERE r.id = $1 AND r.uid = $2`, c.RunID, c.UID).Scan(&sc.sub.UID, &sc.sub.Role, &sc.sub.DepartmentID, &knowledges)
	if errors.Is(err, pgx.ErrNoRows) {
		return sc, failure.Forbidden("run_not_authorised", "this run can no longer use knowledge bases")
	}
	if err != nil {
		return sc, err
	}
	if len(knowledges) > 0 && string(knowledges) != "null" {
		var ks []string
		if json.Unmarshal(knowledges, &ks) == nil && len(ks) > 0 {
			sc.allowed = ks
		}
	}
	return sc, nil
}

// visible returns the KBs in scope.
func (sc scope) visible(ctx context.Context, d Deps) ([]kb.KB, error) {
	all, err := d.KBs.List(ctx, sc.sub)
	if err != nil {
		return nil, err
	}
	if sc.allowed == nil {
		return all, nil
	}
	out := all[:0]
	for _, k := range all {
		if slices.Contains(sc.allowed, k.KBID) {
			out = append(out, k)
		}
	}
	return out, nil
}

// kb returns one KB in scope; anything else reads as "not available".
func (sc scope) kb(ctx context.Context, d Deps, kbID string) (kb.KB, error) {
	if sc.allowed != nil && !slices.Contains(sc.allowed, kbID) {
		return kb.KB{}, notAvailable(kbID)
	}
	k, err := d.KBs.Get(ctx, sc.sub, kbID)
	if errors.Is(err, kb.ErrNotFound) {
		return kb.KB{}, notAvailable(kbID)
	}
	return k, err
}

func notAvailable(kbID string) error {
	return failure.NotFound("kb_not_available", "knowledge base %q does not exist or is not enabled for this conversation; call list_kbs", kbID)
}

// run decodes args strictly, runs fn and turns coded failures into tool
// errors the model can read; other errors are infrastructure (retried).
func run[T any](ctx context.Context, d Deps, c tool.Call, fn func(scope, T) (any, error)) (tool.Result, error) {
	var args T
	dec := json.NewDecoder(bytes.NewReader([]byte(c.Arguments)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return tool.Errorf("invalid arguments: " + err.Error()), nil
	}
	sc, err := scopeOf(ctx, d, c)
	if err != nil {
		if fe, ok := failure.As(err); ok {
			return tool.Errorf(fe.Message), nil
		}
		return tool.Result{}, err
	}
	out, err := fn(sc, args)
	if err != nil {
		if fe, ok := failure.As(err); ok {
			return tool.Errorf(fe.Message), nil
		}
		return tool.Result{}, err
	}
	if text, ok := out.(string); ok { // a text result (get_mindmap)
		return tool.Result{Output: text}, nil
	}
	text, err := tool.JSON(out)
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: text}, nil
}

type listKBs struct{ d Deps }

func (listKBs) Spec() tool.Spec { return kbspec.ListKBs() }

func (t listKBs) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	return run(ctx, t.d, c, func(sc scope, _ struct {
		Dummy string `json:"dummy"`
	}) (any, error) {
		kbs, err := sc.visible(ctx, t.d)
		if err != nil {
			return nil, err
		}
		out := make([]map[string]string, 0, len(kbs))
		for _, k := range kbs {
			desc := k.Description
			if desc == "" {
				desc = "无描述"
			}
			out = append(out, map[string]string{"kb_id": k.KBID, "name": k.Name, "description": desc})
		}
		return out, nil
	})
}

type queryKB struct{ d Deps }

func (queryKB) Spec() tool.Spec { return kbspec.QueryKB() }

func (t queryKB) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	return run(ctx, t.d, c, func(sc scope, a struct {
		KBID      string `json:"kb_id"`
		QueryText string `json:"query_text"`
		FileName  string `json:"file_name"`
	}) (any, error) {
		k, err := sc.kb(ctx, t.d, a.KBID)
		if err != nil {
			return nil, err
		}
		res, err := t.d.Retriever.Query(ctx, k, a.QueryText, k.Retrieval(), a.FileName)
		if err != nil {
			if _, coded := failure.As(err); coded {
				return nil, err
			}
			return nil, failure.Unprocessable("search_failed", "检索失败: %v", err)
		}
		return kb.SearchOutput(k.KBID, res), nil
	})
}

type openDocument struct{ d Deps }

func (openDocument) Spec() tool.Spec { return kbspec.OpenDocument() }

func (t openDocument) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	return run(ctx, t.d, c, func(sc scope, a struct {
		KBID       string `json:"kb_id"`
		FileID     string `json:"file_id"`
		Line       int    `json:"line"`
		Offset     int    `json:"offset"`
		WindowSize int    `json:"window_size"`
	}) (any, error) {
		md, err := t.document(ctx, sc, a.KBID, a.FileID)
		if err != nil {
			return nil, err
		}
		return kb.OpenWindow(a.KBID, a.FileID, md, a.Line, a.Offset, a.WindowSize)
	})
}

// document reads a parsed file of a KB in scope.
func (t openDocument) document(ctx context.Context, sc scope, kbID, fileID string) (string, error) {
	return readDocument(ctx, t.d, sc, kbID, fileID)
}

func readDocument(ctx context.Context, d Deps, sc scope, kbID, fileID string) (string, error) {
	if _, err := sc.kb(ctx, d, kbID); err != nil {
		return "", err
	}
	f, err := d.KBs.LoadFile(ctx, fileID)
	if err != nil || f.KBID != kbID || f.IsFolder {
		return "", failure.NotFound("file_not_found", "file %q not found in knowledge base %q", fileID, kbID)
	}
	if f.MarkdownKey == nil {
		return "", failure.Unprocessable("not_parsed", "file %q has not been parsed (status %s)", fileID, f.Status)
	}
	return d.ReadMarkdown(ctx, *f.MarkdownKey)
}

type findDocument struct{ d Deps }

func (findDocument) Spec() tool.Spec { return kbspec.FindDocument() }

func (t findDocument) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	return run(ctx, t.d, c, func(sc scope, a struct {
		KBID   string `json:"kb_id"`
		FileID string `json:"file_id"`
		kb.FindOptions
	}) (any, error) {
		md, err := readDocument(ctx, t.d, sc, a.KBID, a.FileID)
		if err != nil {
			return nil, err
		}
		return kb.Find(a.KBID, a.FileID, md, a.FindOptions)
	})
}

type searchFile struct{ d Deps }

func (searchFile) Spec() tool.Spec { return kbspec.SearchFile() }

func (t searchFile) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	return run(ctx, t.d, c, func(sc scope, a struct {
		KBName string `json:"kb_name"`
		Query  string `json:"query"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}) (any, error) {
		if strings.TrimSpace(a.KBName) == "" && strings.TrimSpace(a.Query) == "" {
			return nil, failure.Unprocessable("invalid_arguments", "give kb_name, query or both")
		}
		if a.Limit == 0 {
			a.Limit = 300
		}
		if a.Limit < 1 || a.Limit > 5000 || a.Offset < 0 {
			return nil, failure.Unprocessable("invalid_arguments", "limit must be 1–5000 and offset ≥ 0")
		}
		kbs, err := sc.visible(ctx, t.d)
		if err != nil {
			return nil, err
		}
		names := map[string]string{}
		var ids []string
		for _, k := range kbs {
			if a.KBName == "" || k.Name == a.KBName || k.KBID == a.KBName {
				names[k.KBID] = k.Name
				ids = append(ids, k.KBID)
			}
		}
		if a.KBName != "" && len(ids) == 0 {
			return nil, notAvailable(a.KBName)
		}
		files, total, err := t.d.KBs.SearchFiles(ctx, ids, a.Query, a.Offset, a.Limit)
		if err != nil {
			return nil, err
		}
		out := make([]map[string]any, 0, len(files))
		for _, f := range files {
			out = append(out, map[string]any{"kb_id": f.KBID, "kb_name": names[f.KBID], "file_id": f.FileID, "filename": f.Filename,
				"file_type": f.FileType, "status": f.Status, "created_at": f.CreatedAt, "updated_at": f.UpdatedAt, "file_size": f.FileSize})
		}
		return map[string]any{"files": out, "total": total, "offset": a.Offset, "limit": a.Limit, "has_more": a.Offset+len(files) < total}, nil
	})
}
