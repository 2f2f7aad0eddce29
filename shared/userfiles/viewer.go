package userfiles

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// The viewer: a thread's files by their sandbox virtual paths
// (/home/gem/user-data/{workspace,uploads,outputs}, /home/gem/skills).
// Listings and reads never start a sandbox.

// maxUploadFiles is the most files one upload takes (as the original).
const maxUploadFiles = 50

// protected are directories the viewer never deletes.
var protected = map[string]bool{Root: true, Home: true, UserData: true, WorkspaceDir: true, UploadsDir: true, OutputsDir: true, SkillsDir: true}

// viewerPath normalizes a viewer path and keeps it inside the namespaces.
func viewerPath(p string) (string, error) {
	clean, err := cleanVirtual(p)
	if err != nil {
		return "", err
	}
	if clean == Root || clean == Home || within(clean, UserData) || within(clean, SkillsDir) {
		return clean, nil
	}
	return "", failure.Forbidden("path_forbidden", "%s is outside the viewer's namespaces (%s, %s)", clean, UserData, SkillsDir)
}

// Tree lists one directory of a thread's files. "/" lists the namespaces
// (user-data, and skills when the thread has any) without touching files.
func (s *Service) Tree(ctx context.Context, uid, threadID, p string) ([]Entry, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return nil, err
	}
	clean, err := viewerPath(p)
	if err != nil {
		return nil, err
	}
	if clean == Root || clean == Home {
		out := []Entry{{Path: UserData + "/", Name: "user-data", IsDir: true}}
		if es, _, err := s.cfg.Sandbox.List(ctx, sc, SkillsDir, 1); err == nil && len(es) > 0 {
			out = append(out, Entry{Path: SkillsDir + "/", Name: "skills", IsDir: true})
		}
		return out, nil
	}
	return s.list(ctx, sc, clean, func(v string) string { return v })
}

// list lists a directory (a missing root directory lists empty), sorted
// directories first then by name, case-insensitively.
func (s *Service) list(ctx context.Context, sc sandbox.Scope, dir string, display func(string) string) ([]Entry, error) {
	es, _, err := s.cfg.Sandbox.List(ctx, sc, dir, 1)
	if isNotFound(err) && protected[dir] {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fileErr(err, dir)
	}
	out := make([]Entry, 0, len(es))
	for _, e := range es {
		out = append(out, entryOf(e, display(e.Path)))
	}
	sortEntries(out)
	return out, nil
}

func sortEntries(es []Entry) {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].IsDir != es[j].IsDir {
			return es[i].IsDir
		}
		return strings.ToLower(es[i].Name) < strings.ToLower(es[j].Name)
	})
}

// File previews a thread file.
func (s *Service) File(ctx context.Context, uid, threadID, p string) (Preview, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return Preview{}, err
	}
	clean, err := viewerPath(p)
	if err != nil {
		return Preview{}, err
	}
	return s.preview(ctx, sc, clean)
}

func (s *Service) preview(ctx context.Context, sc sandbox.Scope, clean string) (Preview, error) {
	data, size, truncated, err := s.cfg.Sandbox.ReadFile(ctx, sc, clean, s.cfg.MaxPreviewBytes)
	if err != nil {
		return Preview{}, fileErr(err, clean)
	}
	return preview(clean, data, size, truncated), nil
}

// Delete removes a thread file or directory (recursively); the namespace
// roots cannot be deleted, nor anything read-only (skills).
func (s *Service) Delete(ctx context.Context, uid, threadID, p string) (string, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return "", err
	}
	clean, err := viewerPath(p)
	if err != nil {
		return "", err
	}
	return clean, s.delete(ctx, sc, clean)
}

func (s *Service) delete(ctx context.Context, sc sandbox.Scope, clean string) error {
	if protected[clean] {
		return failure.Forbidden("path_forbidden", "%s cannot be deleted", clean)
	}
	return fileErr(s.cfg.Sandbox.DeleteFile(ctx, sc, clean, true), clean)
}

// Mkdir creates parent/name in a thread's writable directories.
func (s *Service) Mkdir(ctx context.Context, uid, threadID, parent, name string) (Entry, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return Entry{}, err
	}
	clean, err := viewerPath(parent)
	if err != nil {
		return Entry{}, err
	}
	return s.mkdir(ctx, sc, clean, name, func(v string) string { return v })
}

func (s *Service) mkdir(ctx context.Context, sc sandbox.Scope, parent, name string, display func(string) string) (Entry, error) {
	if err := validName(name); err != nil {
		return Entry{}, err
	}
	p := path.Join(parent, name)
	if _, err := s.cfg.Sandbox.Stat(ctx, sc, p); err == nil {
		return Entry{}, failure.Conflict("file_exists", "%s exists", p)
	}
	if err := s.cfg.Sandbox.Mkdir(ctx, sc, p); err != nil {
		return Entry{}, fileErr(err, p)
	}
	e, err := s.cfg.Sandbox.Stat(ctx, sc, p)
	if err != nil {
		return Entry{}, fileErr(err, p)
	}
	return entryOf(e, display(p)), nil
}

// Upload is one uploaded file.
type Upload struct {
	Name string
	Data []byte
}

// Upload writes files into parent (a writable directory of the thread);
// an existing name gets a " (n)" suffix. On a failure the files this call
// wrote are removed again.
func (s *Service) Upload(ctx context.Context, uid, threadID, parent string, files []Upload) ([]Entry, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return nil, err
	}
	clean, err := viewerPath(parent)
	if err != nil {
		return nil, err
	}
	return s.upload(ctx, sc, clean, files, func(v string) string { return v })
}

func (s *Service) upload(ctx context.Context, sc sandbox.Scope, parent string, files []Upload, display func(string) string) ([]Entry, error) {
	if len(files) == 0 {
		return nil, failure.Invalid("missing_file", "the form has no file field")
	}
	if len(files) > maxUploadFiles {
		return nil, failure.Unprocessable("too_many_files", "at most %d files per upload", maxUploadFiles)
	}
	for _, f := range files {
		if err := validName(f.Name); err != nil {
			return nil, err
		}
		if err := CheckUpload(f.Name, f.Data, s.cfg.MaxUploadBytes); err != nil {
			return nil, err
		}
	}
	var out []Entry
	var written []string
	for _, f := range files {
		p, err := s.writeUnique(ctx, sc, parent, f.Name, f.Data)
		if err != nil {
			for _, w := range written {
				_ = s.cfg.Sandbox.DeleteFile(ctx, sc, w, false)
			}
			return nil, err
		}
		written = append(written, p)
		out = append(out, Entry{Path: display(p), Name: path.Base(p), Size: int64(len(f.Data))})
	}
	return out, nil
}

// writeUnique writes data as dir/name, or dir/"stem (n).ext" when taken.
func (s *Service) writeUnique(ctx context.Context, sc sandbox.Scope, dir, name string, data []byte) (string, error) {
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 0; i < 1000; i++ {
		cand := name
		if i > 0 {
			cand = fmt.Sprintf("%s (%d)%s", stem, i, ext)
		}
		p := path.Join(dir, cand)
		_, err := s.cfg.Sandbox.WriteFile(ctx, sc, p, data, true)
		if err == nil {
			return p, nil
		}
		if !sandbox.IsCode(err, "exists") {
			return "", fileErr(err, p)
		}
	}
	return "", failure.Conflict("file_exists", "%s and its numbered copies exist", path.Join(dir, name))
}

// Search finds a thread's files whose path matches query fuzzily, best
// first.
func (s *Service) Search(ctx context.Context, uid, threadID, query string, limit int) ([]Entry, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return nil, err
	}
	return s.search(ctx, sc, UserData, query, limit, func(v string) string { return v })
}

// Download returns a file, or a directory as a zip.
func (s *Service) Download(ctx context.Context, uid, threadID, p string) (Served, error) {
	sc, err := s.threadScope(ctx, uid, threadID)
	if err != nil {
		return Served{}, err
	}
	clean, err := viewerPath(p)
	if err != nil {
		return Served{}, err
	}
	if clean == Root || clean == Home {
		clean = UserData
	}
	return s.download(ctx, sc, clean)
}

func (s *Service) download(ctx context.Context, sc sandbox.Scope, clean string) (Served, error) {
	st, err := s.cfg.Sandbox.Stat(ctx, sc, clean)
	if err != nil {
		return Served{}, fileErr(err, clean)
	}
	if st.IsDir {
		var buf bytes.Buffer
		if err := s.cfg.Sandbox.Archive(ctx, sc, clean, &buf); err != nil {
			return Served{}, fileErr(err, clean)
		}
		return Served{Name: path.Base(clean) + ".zip", Data: buf.Bytes(), ContentType: "application/zip"}, nil
	}
	data, _, _, err := s.cfg.Sandbox.ReadFile(ctx, sc, clean, 0)
	if err != nil {
		return Served{}, fileErr(err, clean)
	}
	sv := serve(path.Base(clean), data)
	return sv, nil
}
