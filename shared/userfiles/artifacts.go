package userfiles

import (
	"context"
	"path"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// artifactPath maps the artifact route's path ("outputs/report.md",
// "/home/gem/user-data/outputs/report.md" or "home/gem/…" as a URL path
// segment) to a virtual path under /home/gem/user-data.
func artifactPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		return "", ErrPathRequired
	}
	if strings.HasPrefix(p, "home/gem/") {
		p = "/" + p
	}
	if !strings.HasPrefix(p, "/") {
		p = UserData + "/" + p
	}
	clean, err := cleanVirtual(p)
	if err != nil {
		return "", err
	}
	if !within(clean, UserData) || clean == UserData {
		return "", failure.Forbidden("path_forbidden", "%s is not a thread file", clean)
	}
	return clean, nil
}

// Artifact returns a thread file to download or preview.
func (s *Service) Artifact(ctx context.Context, uid, threadID, p string) (Served, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return Served{}, err
	}
	v, err := artifactPath(p)
	if err != nil {
		return Served{}, err
	}
	data, _, _, err := s.cfg.Sandbox.ReadFile(ctx, sc, v, 0)
	if err != nil {
		return Served{}, fileErr(err, v)
	}
	return serve(path.Base(v), data), nil
}

// SavedArtifactsDir is where saved artifacts land in the workspace.
const SavedArtifactsDir = WorkspaceDir + "/saved_artifacts"

// Saved is an artifact copied into the workspace.
type Saved struct {
	Name          string `json:"name"`
	Path          string `json:"path"`           // the sandbox virtual path
	SourcePath    string `json:"source_path"`    // the artifact's virtual path
	WorkspacePath string `json:"workspace_path"` // relative to the workspace
	Size          int64  `json:"size"`
}

// SaveArtifact copies a thread file into workspace/saved_artifacts/, with
// " (n)" added to the name when it is taken.
func (s *Service) SaveArtifact(ctx context.Context, uid, threadID, p string) (Saved, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return Saved{}, err
	}
	v, err := artifactPath(p)
	if err != nil {
		return Saved{}, err
	}
	if within(v, SavedArtifactsDir) {
		return Saved{}, failure.Unprocessable("already_saved", "%s is already in the workspace's saved artifacts", v)
	}
	data, _, _, err := s.cfg.Sandbox.ReadFile(ctx, sc, v, 0)
	if err != nil {
		return Saved{}, fileErr(err, v)
	}
	dst, err := s.writeUnique(ctx, sc, SavedArtifactsDir, path.Base(v), data)
	if err != nil {
		return Saved{}, err
	}
	return Saved{Name: path.Base(dst), Path: dst, SourcePath: v, WorkspacePath: workspaceDisplay(dst), Size: int64(len(data))}, nil
}

// Mention is a file the composer can insert, by its sandbox virtual path.
type Mention struct {
	Path   string `json:"path"`
	Name   string `json:"name"`
	IsDir  bool   `json:"is_dir"`
	Size   int64  `json:"size"`
	Source string `json:"source"` // "thread" (uploads, outputs) or "workspace"
}

// Mentions searches files for the composer: before a thread exists
// (threadID empty) the user's workspace only; with a thread, the thread's
// uploads and outputs first, then the workspace.
func (s *Service) Mentions(ctx context.Context, uid, threadID, query string, limit int) ([]Mention, error) {
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 100)
	var out []Mention
	add := func(es []Entry, source string) {
		for _, e := range es {
			if len(out) < limit {
				out = append(out, Mention{Path: strings.TrimSuffix(e.Path, "/"), Name: e.Name, IsDir: e.IsDir, Size: e.Size, Source: source})
			}
		}
	}
	id := func(v string) string { return v }
	if threadID != "" {
		sc, err := s.threadScope(ctx, uid, threadID)
		if err != nil {
			return nil, err
		}
		for _, dir := range []string{UploadsDir, OutputsDir} {
			es, err := s.search(ctx, sc, dir, query, limit, id)
			if err != nil {
				return nil, err
			}
			add(es, "thread")
		}
	}
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return nil, err
	}
	es, err := s.search(ctx, sc, WorkspaceDir, query, limit, id)
	if err != nil {
		return nil, err
	}
	add(es, "workspace")
	if out == nil {
		out = []Mention{}
	}
	return out, nil
}
