// Package mindmap is the mind maps of knowledge bases (the original's
// 知识导图): a tree of categories whose leaves are the knowledge base's files,
// made by a chat model from the file list, stored in kb_mindmaps (migration
// 0063, owned here), updated incrementally (files removed since are cut from
// the tree without a model call; files added are given to the model with the
// current tree), and rendered as the text tree of the agent's get_mindmap.
//
// Imported by: functions/intake, shared/kbtool, shared/bootstrap/knowledge
// and tests. May import: shared/access, shared/failure, shared/kb,
// shared/llm, pgx and the standard library.
package mindmap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// Node is a node of a mind map (the original's {content, children}).
type Node struct {
	Content  string `json:"content"`
	Children []Node `json:"children,omitempty"`
}

// Map is a knowledge base's stored mind map.
type Map struct {
	KBID      string         `json:"kb_id"`
	Mindmap   Node           `json:"mindmap"`
	FileIDs   []string       `json:"file_ids"`
	Metadata  map[string]any `json:"metadata"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// KBs checks access (kb.Store: Get for read, GetManaged for manage; List the
// readable ones).
type KBs interface {
	Get(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
	GetManaged(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
	List(ctx context.Context, sub access.Subject) ([]kb.KB, error)
}

// Files lists a knowledge base's files (kb.Store).
type Files interface {
	ListFiles(ctx context.Context, kbID string, in kb.ListInput) ([]kb.File, int, error)
}

// Models resolves chat models (llm.Registry).
type Models interface {
	ChatModel(spec string) (llm.ChatModel, string, error)
	DefaultModel() string
}

// Service is the mind-map use cases.
type Service struct {
	Pool   *pgxpool.Pool
	KBs    KBs
	Files  Files
	Models Models
}

// MaxFiles is how many files one generation gives the model (the
// original's cap: a longer prompt is not worth it).
const MaxFiles = 20

// FileInfo is one file of a knowledge base as the mind-map routes list it.
type FileInfo struct {
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
	FileType string `json:"file_type"`
	Status   string `json:"status"`
}

// files lists every file (not folder) of a knowledge base, by name.
func (s *Service) files(ctx context.Context, kbID string) ([]FileInfo, error) {
	var out []FileInfo
	for off := 0; ; off += 500 {
		page, total, err := s.Files.ListFiles(ctx, kbID, kb.ListInput{AllLevels: true, Offset: off, Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, f := range page {
			if !f.IsFolder {
				out = append(out, FileInfo{FileID: f.FileID, Filename: f.Filename, FileType: f.FileType, Status: f.Status})
			}
		}
		if off+500 >= total || len(page) == 0 {
			return out, nil
		}
	}
}

// Databases lists the knowledge bases sub reads, with their file counts
// and whether they have a mind map (GET /api/knowledge/mindmap/databases).
func (s *Service) Databases(ctx context.Context, sub access.Subject) ([]map[string]any, error) {
	list, err := s.KBs.List(ctx, sub)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, k := range list {
		ids[i] = k.KBID
	}
	has := map[string]bool{}
	rows, err := s.Pool.Query(ctx, `SELECT kb_id FROM kb_mindmaps WHERE kb_id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, id := range got {
		has[id] = true
	}
	out := make([]map[string]any, 0, len(list))
	for _, k := range list {
		out = append(out, map[string]any{"db_id": k.KBID, "kb_id": k.KBID, "name": k.Name, "description": k.Description,
			"kb_type": k.KBType, "has_mindmap": has[k.KBID]})
	}
	return out, nil
}

// Files lists a readable knowledge base's files (GET …/mindmap/files).
func (s *Service) FileList(ctx context.Context, sub access.Subject, kbID string) ([]FileInfo, error) {
	if _, err := s.KBs.Get(ctx, sub, kbID); err != nil {
		return nil, err
	}
	fs, err := s.files(ctx, kbID)
	if fs == nil {
		fs = []FileInfo{}
	}
	return fs, err
}

// Get returns a readable knowledge base's mind map (nil: none yet).
func (s *Service) Get(ctx context.Context, sub access.Subject, kbID string) (*Map, error) {
	if _, err := s.KBs.Get(ctx, sub, kbID); err != nil {
		return nil, err
	}
	return s.load(ctx, kbID)
}

func (s *Service) load(ctx context.Context, kbID string) (*Map, error) {
	m := Map{KBID: kbID}
	var tree, meta []byte
	err := s.Pool.QueryRow(ctx, `SELECT mindmap, file_ids, metadata, updated_at FROM kb_mindmaps WHERE kb_id = $1`, kbID).
		Scan(&tree, &m.FileIDs, &meta, &m.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load mind map: %w", err)
	}
	if err := json.Unmarshal(tree, &m.Mindmap); err != nil {
		return nil, fmt.Errorf("stored mind map: %w", err)
	}
	_ = json.Unmarshal(meta, &m.Metadata)
	return &m, nil
}

// Diff is what changed in the files since the mind map was made.
type Diff struct {
	HasMindmap bool       `json:"has_mindmap"`
	Added      []FileInfo `json:"added_files"`
	Removed    []string   `json:"removed_file_ids"`
	HasChanges bool       `json:"has_changes"`
}

// Diff compares a readable knowledge base's files with its mind map's.
func (s *Service) Diff(ctx context.Context, sub access.Subject, kbID string) (Diff, error) {
	if _, err := s.KBs.Get(ctx, sub, kbID); err != nil {
		return Diff{}, err
	}
	m, err := s.load(ctx, kbID)
	if err != nil {
		return Diff{}, err
	}
	fs, err := s.files(ctx, kbID)
	if err != nil {
		return Diff{}, err
	}
	return diff(m, fs), nil
}

func diff(m *Map, fs []FileInfo) Diff {
	d := Diff{Added: []FileInfo{}, Removed: []string{}}
	tracked := map[string]bool{}
	if m != nil {
		d.HasMindmap = true
		for _, id := range m.FileIDs {
			tracked[id] = true
		}
	}
	now := map[string]bool{}
	for _, f := range fs {
		now[f.FileID] = true
		if !tracked[f.FileID] {
			d.Added = append(d.Added, f)
		}
	}
	if m != nil {
		for _, id := range m.FileIDs {
			if !now[id] {
				d.Removed = append(d.Removed, id)
			}
		}
	}
	d.HasChanges = len(d.Added) > 0 || len(d.Removed) > 0
	return d
}

// GenerateInput is POST …/mindmap/generate's body.
type GenerateInput struct {
	FileIDs      []string `json:"file_ids"`       // default: every file (the first MaxFiles)
	UserPrompt   string   `json:"user_prompt"`    // extra instructions
	LLMModelSpec string   `json:"llm_model_spec"` // default: the system default model
	Incremental  bool     `json:"incremental"`
}

// prompt is the fixed instruction of a generation.
const prompt = `You organise the files of a knowledge base into a mind map.
Answer with one JSON object only: {"content": "<knowledge base name>", "children": [{"content": "<category>", "children": [{"content": "<file name>"}]}]}.
Every file name given must appear exactly once as a leaf, spelled exactly as given. Use at most three levels of categories.`

// Generate makes (or, incremental, updates) the mind map of a knowledge
// base sub manages. Incremental with only removed files cuts them from the
// tree without a model call; with added files the model gets the current
// tree and the new names. The tree's leaves are checked against the file
// names asked for: a reply missing one is refused (422), nothing is stored.
func (s *Service) Generate(ctx context.Context, sub access.Subject, kbID string, in GenerateInput) (*Map, error) {
	k, err := s.KBs.GetManaged(ctx, sub, kbID)
	if err != nil {
		return nil, err
	}
	if len(in.UserPrompt) > 4000 {
		return nil, failure.Unprocessable("prompt_too_long", "user_prompt is longer than 4000 bytes")
	}
	fs, err := s.files(ctx, kbID)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, failure.Invalid("knowledge_base_empty", "the knowledge base has no files to map")
	}
	cur, err := s.load(ctx, kbID)
	if err != nil {
		return nil, err
	}
	byID := map[string]FileInfo{}
	for _, f := range fs {
		byID[f.FileID] = f
	}
	var pick []FileInfo
	var base *Node
	switch {
	case in.Incremental && cur != nil:
		d := diff(cur, fs)
		tree := cur.Mindmap
		keep := make([]string, 0, len(cur.FileIDs))
		removed := map[string]bool{}
		for _, id := range d.Removed {
			removed[id] = true
		}
		gone := map[string]bool{}
		for _, f := range cur.FileIDs {
			if removed[f] {
				continue
			}
			keep = append(keep, f)
		}
		names := cur.Metadata["file_names"]
		if nm, ok := names.(map[string]any); ok {
			for id := range removed {
				if n, ok := nm[id].(string); ok {
					gone[n] = true
				}
			}
		}
		tree = cut(tree, gone)
		if len(d.Added) == 0 {
			return s.save(ctx, kbID, tree, keep, fs, map[string]any{"mode": "incremental", "removed": len(d.Removed), "added": 0})
		}
		base, pick = &tree, d.Added
		if len(pick) > MaxFiles {
			pick = pick[:MaxFiles]
		}
		in.FileIDs = keep
	case len(in.FileIDs) > 0:
		for _, id := range in.FileIDs {
			f, ok := byID[id]
			if !ok {
				return nil, failure.Invalid("file_not_found", "file %s is not in this knowledge base", id)
			}
			pick = append(pick, f)
		}
		in.FileIDs = nil
	default:
		pick = fs
		in.FileIDs = nil
	}
	if len(pick) > MaxFiles {
		pick = pick[:MaxFiles]
	}
	spec := strings.TrimSpace(in.LLMModelSpec)
	if spec == "" {
		spec = s.Models.DefaultModel()
	}
	if spec == "" {
		return nil, failure.Unprocessable("no_default_model", "no llm_model_spec given and no default model configured")
	}
	model, modelID, err := s.Models.ChatModel(spec)
	if err != nil {
		return nil, err
	}
	var user strings.Builder
	fmt.Fprintf(&user, "Knowledge base: %s\n", k.Name)
	if k.Description != "" {
		fmt.Fprintf(&user, "Description: %s\n", k.Description)
	}
	if base != nil {
		b, _ := json.Marshal(base)
		fmt.Fprintf(&user, "Current mind map (keep its leaves, add the new files to it):\n%s\n", b)
	}
	user.WriteString("Files:\n")
	want := map[string]bool{}
	for _, f := range pick {
		fmt.Fprintf(&user, "- %s\n", f.Filename)
		want[f.Filename] = true
	}
	if in.UserPrompt != "" {
		fmt.Fprintf(&user, "Instructions: %s\n", in.UserPrompt)
	}
	resp, err := llm.Ask(ctx, model, modelID, prompt, user.String())
	if err != nil {
		return nil, failure.Unprocessable("model_failed", "mind map model: %v", err)
	}
	tree, err := parseTree(resp.Content)
	if err != nil {
		return nil, err
	}
	leaves := map[string]bool{}
	collectLeaves(tree, leaves)
	for n := range want {
		if !leaves[n] {
			return nil, failure.Unprocessable("invalid_mindmap", "the model's mind map lacks the file %q", n)
		}
	}
	ids := append([]string(nil), in.FileIDs...)
	for _, f := range pick {
		ids = append(ids, f.FileID)
	}
	mode := "full"
	if base != nil {
		mode = "incremental"
	}
	return s.save(ctx, kbID, tree, ids, fs, map[string]any{"mode": mode, "model": spec, "files": len(pick)})
}

func (s *Service) save(ctx context.Context, kbID string, tree Node, ids []string, fs []FileInfo, meta map[string]any) (*Map, error) {
	names := map[string]string{}
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	for _, f := range fs {
		if set[f.FileID] {
			names[f.FileID] = f.Filename
		}
	}
	meta["file_names"] = names
	tb, _ := json.Marshal(tree)
	mb, _ := json.Marshal(meta)
	if ids == nil {
		ids = []string{}
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO kb_mindmaps (kb_id, mindmap, file_ids, metadata) VALUES ($1, $2, $3, $4)
		ON CONFLICT (kb_id) DO UPDATE SET mindmap = $2, file_ids = $3, metadata = $4, updated_at = now()`, kbID, tb, ids, mb); err != nil {
		return nil, fmt.Errorf("save mind map: %w", err)
	}
	return s.load(ctx, kbID)
}

// parseTree reads the model's reply: a JSON object, possibly in a code
// fence or prose.
func parseTree(reply string) (Node, error) {
	var n Node
	s := strings.TrimSpace(reply)
	i, j := strings.Index(s, "{"), strings.LastIndex(s, "}")
	if i < 0 || j <= i || json.Unmarshal([]byte(s[i:j+1]), &n) != nil || strings.TrimSpace(n.Content) == "" {
		return n, failure.Unprocessable("invalid_mindmap", "the model did not return a mind map object")
	}
	return n, nil
}

func collectLeaves(n Node, into map[string]bool) {
	if len(n.Children) == 0 {
		into[strings.TrimSpace(n.Content)] = true
	}
	for _, c := range n.Children {
		collectLeaves(c, into)
	}
}

// cut removes the leaves named in gone, then categories left empty (never
// the root).
func cut(n Node, gone map[string]bool) Node {
	out := Node{Content: n.Content}
	for _, c := range n.Children {
		if len(c.Children) == 0 {
			if !gone[strings.TrimSpace(c.Content)] {
				out.Children = append(out.Children, c)
			}
			continue
		}
		cc := cut(c, gone)
		if len(cc.Children) > 0 {
			out.Children = append(out.Children, cc)
		}
	}
	return out
}

// Render is the agent's get_mindmap text: "知识库 X 的思维导图结构：" and an
// indented list.
func Render(kbName string, n Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "知识库 %s 的思维导图结构：\n\n", kbName)
	var walk func(Node, int)
	walk = func(n Node, depth int) {
		fmt.Fprintf(&b, "%s- %s\n", strings.Repeat("  ", depth), n.Content)
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return strings.TrimRight(b.String(), "\n")
}

// ForAgent returns the rendered mind map of the readable knowledge base
// named name (the agent's get_mindmap; knowledge bases are found by name
// as in the original).
func (s *Service) ForAgent(ctx context.Context, k kb.KB) (string, error) {
	m, err := s.load(ctx, k.KBID)
	if err != nil {
		return "", err
	}
	if m == nil {
		return "", failure.NotFound("mindmap_not_found", "知识库 %s 还没有思维导图", k.Name)
	}
	return Render(k.Name, m.Mindmap), nil
}
