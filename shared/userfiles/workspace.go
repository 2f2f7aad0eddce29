package userfiles

import (
	"context"
	"path"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// The workspace: the user's own directory, shared by all their threads
// (/home/gem/user-data/workspace in every sandbox). Paths are relative to
// it ("/" is its root; a full virtual path below it is accepted too) and
// answers name files the same way.

// workspacePath maps a caller's workspace path to its virtual path.
func workspacePath(p string) (string, error) {
	clean, err := cleanVirtual(p)
	if err != nil {
		return "", err
	}
	if within(clean, WorkspaceDir) {
		return clean, nil
	}
	if within(clean, Home) {
		return "", failure.Forbidden("path_forbidden", "%s is outside your workspace", clean)
	}
	return path.Join(WorkspaceDir, clean), nil
}

// workspaceDisplay is a virtual path relative to the workspace.
func workspaceDisplay(v string) string {
	if rest, ok := strings.CutPrefix(v, WorkspaceDir); ok && (rest == "" || rest[0] == '/') {
		if rest == "" {
			return "/"
		}
		return rest
	}
	return v
}

// WorkspaceTree lists a workspace directory (recursive: its whole subtree;
// filesOnly: no directories).
func (s *Service) WorkspaceTree(ctx context.Context, uid, p string, recursive, filesOnly bool) ([]Entry, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return nil, err
	}
	v, err := workspacePath(p)
	if err != nil {
		return nil, err
	}
	if !recursive {
		es, err := s.list(ctx, sc, v, workspaceDisplay)
		if err != nil || !filesOnly {
			return es, err
		}
		return filesOf(es), nil
	}
	es, _, err := s.cfg.Sandbox.List(ctx, sc, v, 32)
	if isNotFound(err) && v == WorkspaceDir {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fileErr(err, p)
	}
	out := make([]Entry, 0, len(es))
	for _, e := range es {
		if filesOnly && e.IsDir {
			continue
		}
		out = append(out, entryOf(e, workspaceDisplay(e.Path)))
	}
	return out, nil
}

func filesOf(es []Entry) []Entry {
	out := es[:0]
	for _, e := range es {
		if !e.IsDir {
			out = append(out, e)
		}
	}
	return out
}

// WorkspaceSearch finds workspace files fuzzily.
func (s *Service) WorkspaceSearch(ctx context.Context, uid, query string, limit int) ([]Entry, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return nil, err
	}
	return s.search(ctx, sc, WorkspaceDir, query, limit, workspaceDisplay)
}

// WorkspaceFile previews a workspace file.
func (s *Service) WorkspaceFile(ctx context.Context, uid, p string) (Preview, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return Preview{}, err
	}
	v, err := workspacePath(p)
	if err != nil {
		return Preview{}, err
	}
	pv, err := s.preview(ctx, sc, v)
	return pv, relabel(err, v)
}

// relabel names workspace paths relative to the workspace in errors.
func relabel(err error, v string) error {
	if fe, ok := failure.As(err); ok {
		return failure.New(fe.Kind, fe.Code, "%s", strings.ReplaceAll(fe.Message, v, workspaceDisplay(v)))
	}
	return err
}

// WriteWorkspaceFile creates or replaces a text file.
func (s *Service) WriteWorkspaceFile(ctx context.Context, uid, p, content string) (Entry, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return Entry{}, err
	}
	v, err := workspacePath(p)
	if err != nil {
		return Entry{}, err
	}
	if v == WorkspaceDir {
		return Entry{}, failure.Invalid("is_directory", "/ is a directory")
	}
	if int64(len(content)) > s.cfg.MaxUploadBytes {
		return Entry{}, failure.New(failure.KindTooLarge, "file_too_large", "content is over %d bytes", s.cfg.MaxUploadBytes)
	}
	n, err := s.cfg.Sandbox.WriteFile(ctx, sc, v, []byte(content), false)
	if err != nil {
		return Entry{}, relabel(fileErr(err, v), v)
	}
	return Entry{Path: workspaceDisplay(v), Name: path.Base(v), Size: n}, nil
}

// DeleteWorkspacePath removes a file or a directory tree (not the root).
func (s *Service) DeleteWorkspacePath(ctx context.Context, uid, p string) (string, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return "", err
	}
	v, err := workspacePath(p)
	if err != nil {
		return "", err
	}
	return workspaceDisplay(v), relabel(s.delete(ctx, sc, v), v)
}

// WorkspaceMkdir creates parent/name.
func (s *Service) WorkspaceMkdir(ctx context.Context, uid, parent, name string) (Entry, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return Entry{}, err
	}
	v, err := workspacePath(parent)
	if err != nil {
		return Entry{}, err
	}
	e, err := s.mkdir(ctx, sc, v, name, workspaceDisplay)
	return e, relabel(err, path.Join(v, name))
}

// WorkspaceUpload writes uploaded files into parent.
func (s *Service) WorkspaceUpload(ctx context.Context, uid, parent string, files []Upload) ([]Entry, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return nil, err
	}
	v, err := workspacePath(parent)
	if err != nil {
		return nil, err
	}
	return s.upload(ctx, sc, v, files, workspaceDisplay)
}

// WorkspaceDownload returns a file, or a directory as a zip.
func (s *Service) WorkspaceDownload(ctx context.Context, uid, p string) (Served, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return Served{}, err
	}
	v, err := workspacePath(p)
	if err != nil {
		return Served{}, err
	}
	sv, err := s.download(ctx, sc, v)
	if v == WorkspaceDir && err == nil {
		sv.Name = "workspace.zip"
	}
	return sv, relabel(err, v)
}

// WorkspaceRead returns the base name and content of one workspace file of
// at most max bytes (a directory: 400 is_directory; longer: 413
// file_too_large), for imports into a knowledge base.
func (s *Service) WorkspaceRead(ctx context.Context, uid, p string, max int64) (string, []byte, error) {
	sc, err := s.workspaceScope(uid)
	if err != nil {
		return "", nil, err
	}
	v, err := workspacePath(p)
	if err != nil {
		return "", nil, err
	}
	st, err := s.cfg.Sandbox.Stat(ctx, sc, v)
	if err != nil {
		return "", nil, relabel(fileErr(err, v), v)
	}
	if st.IsDir {
		return "", nil, failure.Invalid("is_directory", "%s is a directory", workspaceDisplay(v))
	}
	data, _, truncated, err := s.cfg.Sandbox.ReadFile(ctx, sc, v, max)
	if err != nil {
		return "", nil, relabel(fileErr(err, v), v)
	}
	if truncated {
		return "", nil, failure.New(failure.KindTooLarge, "file_too_large", "%s is larger than %d MB", workspaceDisplay(v), max>>20)
	}
	return path.Base(v), data, nil
}
