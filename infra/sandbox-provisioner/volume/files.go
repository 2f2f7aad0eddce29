package volume

import (
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// Errors of the file operations; the provisioner maps them to HTTP codes.
var (
	ErrPathNotAllowed = errors.New("path not allowed") // outside the scope's roots, or `..`
	ErrReadOnly       = errors.New("path is read-only")
	ErrNotFound       = errors.New("no such file or directory")
	ErrTooLarge       = errors.New("file too large")
	ErrExists         = errors.New("file exists")
	ErrIsDir          = errors.New("is a directory")
	ErrNotDir         = errors.New("not a directory")
)

// Entry describes one file or directory by its sandbox virtual path.
type Entry struct {
	Path    string    `json:"path"`
	Name    string    `json:"name"`
	IsDir   bool      `json:"is_dir"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

// Files serves file operations on scopes of a Layout, addressing files by
// their sandbox virtual paths. Absolute paths must start with /home/gem;
// relative ones are taken below /home/gem/user-data ("outputs/a.txt").
type Files struct {
	Layout  Layout
	MaxFile int64 // largest file Write accepts and Read returns whole
}

// root is one mounted directory as seen through a virtual prefix.
type root struct {
	virtual  string // /home/gem/user-data/outputs
	host     string
	writable bool
}

func (f *Files) roots(s Scope) []root {
	d := f.Layout.DirsOf(s)
	if s.WorkspaceOnly() {
		return []root{{backend.WorkspaceDir, d.Workspace, true}}
	}
	return []root{
		{backend.WorkspaceDir, d.Workspace, true},
		{backend.UploadsDir, d.Uploads, true},
		{backend.OutputsDir, d.Outputs, true},
		{backend.SkillsDir, d.Skills, false},
	}
}

// Clean turns a caller's path into a clean absolute virtual path, refusing
// any `..` segment outright (even one that would stay inside).
func Clean(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: empty path", ErrPathNotAllowed)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q has a .. segment", ErrPathNotAllowed, p)
		}
	}
	if !strings.HasPrefix(p, "/") {
		p = backend.UserDataDir + "/" + p
	}
	return path.Clean(p), nil
}

// resolve maps a virtual path to its root and the path below it ("." for
// the root itself). Virtual directories above the roots (/home/gem,
// /home/gem/user-data) answer ok=false with virtual=true.
func (f *Files) resolve(s Scope, p string) (r root, rel string, virtualDir bool, err error) {
	s, err = s.Normalize()
	if err != nil {
		return r, "", false, err
	}
	p, err = Clean(p)
	if err != nil {
		return r, "", false, err
	}
	if p == backend.Home || p == backend.UserDataDir {
		return r, "", true, nil
	}
	for _, cand := range f.roots(s) {
		if p == cand.virtual {
			return cand, ".", false, nil
		}
		if rest, ok := strings.CutPrefix(p, cand.virtual+"/"); ok {
			return cand, rest, false, nil
		}
	}
	return r, "", false, fmt.Errorf("%w: %s is outside %s and %s", ErrPathNotAllowed, p, backend.UserDataDir, backend.SkillsDir)
}

// open returns an os.Root for r: every lookup below it stays inside, so a
// symlink the sandbox planted cannot lead elsewhere.
func open(r root) (*os.Root, error) {
	rt, err := os.OpenRoot(r.host)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, r.virtual)
	}
	return rt, err
}

func mapErr(err error, virtual string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s", ErrNotFound, virtual)
	case errors.Is(err, os.ErrExist):
		return fmt.Errorf("%w: %s", ErrExists, virtual)
	case strings.Contains(err.Error(), "path escapes from parent"):
		return fmt.Errorf("%w: %s leads outside its directory", ErrPathNotAllowed, virtual)
	case errors.Is(err, errIsDir):
		return fmt.Errorf("%w: %s", ErrIsDir, virtual)
	}
	return err
}

var errIsDir = errors.New("is a directory")

// Read returns up to max bytes of a file (max <= 0: MaxFile) and its size;
// a file larger than MaxFile with max <= 0 is ErrTooLarge.
func (f *Files) Read(s Scope, p string, max int64) ([]byte, int64, error) {
	r, rel, vdir, err := f.resolve(s, p)
	if err != nil {
		return nil, 0, err
	}
	if vdir || rel == "." {
		return nil, 0, fmt.Errorf("%w: %s", ErrIsDir, p)
	}
	rt, err := open(r)
	if err != nil {
		return nil, 0, err
	}
	defer rt.Close()
	file, err := rt.Open(rel)
	if err != nil {
		return nil, 0, mapErr(err, p)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, 0, err
	}
	if fi.IsDir() {
		return nil, 0, fmt.Errorf("%w: %s", ErrIsDir, p)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%w: %s is not a regular file", ErrPathNotAllowed, p)
	}
	limit := max
	if limit <= 0 {
		if fi.Size() > f.MaxFile {
			return nil, fi.Size(), fmt.Errorf("%w: %s is %d bytes (limit %d)", ErrTooLarge, p, fi.Size(), f.MaxFile)
		}
		limit = f.MaxFile
	}
	data, err := io.ReadAll(io.LimitReader(file, limit))
	return data, fi.Size(), err
}

// openWritable opens a writable root, laying out the scope first when
// this is its first file (a user's workspace before any sandbox ran).
func (f *Files) openWritable(s Scope, r root, p string) (*os.Root, error) {
	if !r.writable {
		return nil, fmt.Errorf("%w: %s", ErrReadOnly, p)
	}
	if _, err := os.Stat(r.host); errors.Is(err, os.ErrNotExist) {
		if _, err := f.Layout.Prepare(s); err != nil {
			return nil, err
		}
	}
	return open(r)
}

// Write creates or replaces a file (parents created) from at most MaxFile
// bytes of body; exclusive refuses an existing file. Only the user-data
// roots are writable. Files are created owned by the sandbox uid so
// commands in the sandbox can edit them.
func (f *Files) Write(s Scope, p string, body io.Reader, exclusive bool) (int64, error) {
	r, rel, vdir, err := f.resolve(s, p)
	if err != nil {
		return 0, err
	}
	if vdir || rel == "." {
		return 0, fmt.Errorf("%w: %s", ErrIsDir, p)
	}
	rt, err := f.openWritable(s, r, p)
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := f.mkdirAll(rt, dir); err != nil {
			return 0, mapErr(err, p)
		}
	}
	if fi, err := rt.Lstat(rel); err == nil {
		if exclusive {
			return 0, fmt.Errorf("%w: %s", ErrExists, p)
		}
		if fi.IsDir() {
			return 0, fmt.Errorf("%w: %s", ErrIsDir, p)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			// Replace the link itself, never write through it.
			if err := rt.Remove(rel); err != nil {
				return 0, mapErr(err, p)
			}
		}
	}
	// Write to a temporary name and rename, so a reader never sees half a
	// file and a write over the size bound leaves the old file intact.
	tmp := path.Join(path.Dir(rel), fmt.Sprintf(".%s.tmp-%d", path.Base(rel), time.Now().UnixNano()))
	file, err := rt.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, mapErr(err, p)
	}
	n, err := io.Copy(file, io.LimitReader(body, f.MaxFile+1))
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > f.MaxFile {
		err = fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, p, f.MaxFile)
	}
	if err == nil && f.Layout.Owner.UID >= 0 {
		err = rt.Lchown(tmp, f.Layout.Owner.UID, f.Layout.Owner.GID)
	}
	if err == nil && exclusive {
		if _, serr := rt.Lstat(rel); serr == nil {
			err = fmt.Errorf("%w: %s", ErrExists, p)
		}
	}
	if err == nil {
		err = rt.Rename(tmp, rel)
	}
	if err != nil {
		_ = rt.Remove(tmp)
		return 0, mapErr(err, p)
	}
	return n, nil
}

func (f *Files) mkdirAll(rt *os.Root, dir string) error {
	cur := ""
	for _, seg := range strings.Split(dir, "/") {
		cur = path.Join(cur, seg)
		err := rt.Mkdir(cur, 0o755)
		if err == nil {
			if f.Layout.Owner.UID >= 0 {
				if err := rt.Lchown(cur, f.Layout.Owner.UID, f.Layout.Owner.GID); err != nil {
					return err
				}
			}
			continue
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		fi, err := rt.Lstat(cur)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: %s", ErrNotDir, cur)
		}
	}
	return nil
}

// Mkdir creates a directory and its parents in a writable root.
func (f *Files) Mkdir(s Scope, p string) error {
	r, rel, vdir, err := f.resolve(s, p)
	if err != nil {
		return err
	}
	if vdir || rel == "." {
		return nil
	}
	rt, err := f.openWritable(s, r, p)
	if err != nil {
		return err
	}
	defer rt.Close()
	return mapErr(f.mkdirAll(rt, rel), p)
}

// Delete removes a file, a symlink (never its target) or, with recursive,
// a directory tree. The roots themselves cannot be deleted.
func (f *Files) Delete(s Scope, p string, recursive bool) error {
	r, rel, vdir, err := f.resolve(s, p)
	if err != nil {
		return err
	}
	if vdir || rel == "." {
		return fmt.Errorf("%w: %s is a root directory", ErrPathNotAllowed, p)
	}
	if !r.writable {
		return fmt.Errorf("%w: %s", ErrReadOnly, p)
	}
	rt, err := open(r)
	if err != nil {
		return err
	}
	defer rt.Close()
	fi, err := rt.Lstat(rel)
	if err != nil {
		return mapErr(err, p)
	}
	if fi.IsDir() && recursive {
		return mapErr(rt.RemoveAll(rel), p)
	}
	return mapErr(rt.Remove(rel), p)
}

// Stat describes one path (a symlink is described, not followed).
func (f *Files) Stat(s Scope, p string) (Entry, error) {
	r, rel, vdir, err := f.resolve(s, p)
	if err != nil {
		return Entry{}, err
	}
	clean, _ := Clean(p)
	if vdir {
		return Entry{Path: clean, Name: path.Base(clean), IsDir: true}, nil
	}
	rt, err := open(r)
	if err != nil {
		return Entry{}, err
	}
	defer rt.Close()
	fi, err := rt.Lstat(rel)
	if err != nil {
		return Entry{}, mapErr(err, p)
	}
	return entry(clean, fi), nil
}

func entry(virtual string, fi fs.FileInfo) Entry {
	e := Entry{Path: virtual, Name: path.Base(virtual), IsDir: fi.IsDir(), ModTime: fi.ModTime().UTC()}
	if !e.IsDir {
		e.Size = fi.Size()
	}
	return e
}

// List lists a directory to depth levels (1: its children), directories
// first then by name, at most limit entries (truncated reports more).
// Symlinks are listed but never followed.
func (f *Files) List(s Scope, p string, depth, limit int) (entries []Entry, truncated bool, err error) {
	if depth <= 0 {
		depth = 1
	}
	clean, err := Clean(p)
	if err != nil {
		return nil, false, err
	}
	err = f.walk(s, clean, depth, func(e Entry) bool {
		if len(entries) >= limit {
			truncated = true
			return false
		}
		entries = append(entries, e)
		return true
	})
	return entries, truncated, err
}

// walk visits the entries below a virtual path to depth levels in
// sorted order; visit returns false to stop.
func (f *Files) walk(s Scope, p string, depth int, visit func(Entry) bool) error {
	r, rel, vdir, err := f.resolve(s, p)
	if err != nil {
		return err
	}
	if vdir {
		s, _ = s.Normalize()
		for _, cand := range f.roots(s) {
			if path.Dir(cand.virtual) == p {
				if !visit(Entry{Path: cand.virtual, Name: path.Base(cand.virtual), IsDir: true}) {
					return errStop
				}
				if depth > 1 {
					if err := f.walk(s, cand.virtual, depth-1, visit); err != nil && !errors.Is(err, ErrNotFound) {
						return err
					}
				}
			}
		}
		if p == backend.Home {
			if !visit(Entry{Path: backend.UserDataDir, Name: "user-data", IsDir: true}) {
				return errStop
			}
			if depth > 1 {
				return f.walk(s, backend.UserDataDir, depth-1, visit)
			}
		}
		return nil
	}
	rt, err := open(r)
	if err != nil {
		return err
	}
	defer rt.Close()
	err = walkRoot(rt, rel, p, depth, visit)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

var errStop = errors.New("stop")

func walkRoot(rt *os.Root, rel, virtual string, depth int, visit func(Entry) bool) error {
	fi, err := rt.Lstat(rel)
	if err != nil {
		return mapErr(err, virtual)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s", ErrNotDir, virtual)
	}
	d, err := rt.Open(rel)
	if err != nil {
		return mapErr(err, virtual)
	}
	infos, err := d.Readdir(-1)
	d.Close()
	if err != nil {
		return err
	}
	sort.Slice(infos, func(i, j int) bool {
		if infos[i].IsDir() != infos[j].IsDir() {
			return infos[i].IsDir()
		}
		return infos[i].Name() < infos[j].Name()
	})
	for _, fi := range infos {
		if strings.HasPrefix(fi.Name(), ".") && strings.Contains(fi.Name(), ".tmp-") {
			continue // a write in progress
		}
		v := path.Join(virtual, fi.Name())
		if !visit(entry(v, fi)) {
			return errStop
		}
		if fi.IsDir() && depth > 1 {
			if err := walkRoot(rt, path.Join(rel, fi.Name()), v, depth-1, visit); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxWalkDepth bounds glob and grep walks.
const maxWalkDepth = 32

// Glob matches files below a directory (default /home/gem/user-data)
// against a pattern relative to it: path.Match per segment, "**" for any
// number of segments. At most limit paths.
func (f *Files) Glob(s Scope, dir, pattern string, limit int) ([]string, bool, error) {
	if dir == "" {
		dir = backend.UserDataDir
	}
	dir, err := Clean(dir)
	if err != nil {
		return nil, false, err
	}
	pattern = strings.TrimPrefix(pattern, dir+"/")
	if strings.HasPrefix(pattern, "/") {
		return nil, false, fmt.Errorf("%w: pattern %q must be relative to %s", ErrPathNotAllowed, pattern, dir)
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, false, fmt.Errorf("%w: bad pattern %q", ErrPathNotAllowed, pattern)
	}
	pat := strings.Split(pattern, "/")
	var out []string
	truncated := false
	err = f.walk(s, dir, maxWalkDepth, func(e Entry) bool {
		rel := strings.TrimPrefix(e.Path, dir+"/")
		if matchSegments(pat, strings.Split(rel, "/")) {
			if len(out) >= limit {
				truncated = true
				return false
			}
			out = append(out, e.Path)
		}
		return true
	})
	return out, truncated, err
}

func matchSegments(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchSegments(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], name[0])
	return ok && matchSegments(pat[1:], name[1:])
}

// Match is one grep hit.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Grep searches regular files below dir (optionally only names matching
// glob) for a regular expression, line by line; files over MaxFile or
// with a NUL in their first block are skipped. At most limit matches.
func (f *Files) Grep(s Scope, dir, pattern, glob string, limit int) ([]Match, bool, error) {
	if dir == "" {
		dir = backend.UserDataDir
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, false, fmt.Errorf("%w: bad pattern: %v", ErrPathNotAllowed, err)
	}
	var files []string
	clean, err := Clean(dir)
	if err != nil {
		return nil, false, err
	}
	if st, err := f.Stat(s, clean); err != nil {
		return nil, false, err
	} else if !st.IsDir {
		files = []string{clean}
	} else if err := f.walk(s, clean, maxWalkDepth, func(e Entry) bool {
		if !e.IsDir && e.Size <= f.MaxFile {
			if glob == "" || matchName(glob, e.Path) {
				files = append(files, e.Path)
			}
		}
		return len(files) < 100000
	}); err != nil {
		return nil, false, err
	}
	var out []Match
	for _, p := range files {
		data, _, err := f.Read(s, p, 0)
		if err != nil {
			continue // raced with a delete, a symlink, or too large
		}
		head := data[:min(len(data), 8000)]
		if strings.IndexByte(string(head), 0) >= 0 {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if re.MatchString(sc.Text()) {
				if len(out) >= limit {
					return out, true, nil
				}
				text := sc.Text()
				if len(text) > 500 {
					text = text[:500]
				}
				out = append(out, Match{Path: p, Line: n, Text: text})
			}
		}
	}
	return out, false, nil
}

func matchName(glob, p string) bool {
	if ok, _ := path.Match(glob, path.Base(p)); ok {
		return true
	}
	return matchSegments(strings.Split(glob, "/"), strings.Split(strings.TrimPrefix(p, "/"), "/"))
}

// Archive writes a directory (or a virtual directory such as
// /home/gem/user-data) as a zip to w: regular files only (symlinks are
// never followed), names relative to the directory. Nothing is written
// when the files total more than maxTotal bytes (ErrTooLarge) or the
// directory holds more than maxFiles files.
func (f *Files) Archive(s Scope, p string, w io.Writer, maxTotal int64, maxFiles int) error {
	clean, err := Clean(p)
	if err != nil {
		return err
	}
	st, err := f.Stat(s, clean)
	if err != nil {
		return err
	}
	if !st.IsDir {
		return fmt.Errorf("%w: %s", ErrNotDir, clean)
	}
	var files []Entry
	var total int64
	err = f.walk(s, clean, maxWalkDepth, func(e Entry) bool {
		if !e.IsDir {
			files = append(files, e)
			total += e.Size
		}
		return len(files) <= maxFiles && total <= maxTotal
	})
	if err != nil {
		return err
	}
	if len(files) > maxFiles || total > maxTotal {
		return fmt.Errorf("%w: %s holds more than %d files or %d bytes", ErrTooLarge, clean, maxFiles, maxTotal)
	}
	zw := zip.NewWriter(w)
	for _, e := range files {
		data, _, err := f.Read(s, e.Path, 0)
		if err != nil {
			continue // a symlink, or raced with a delete
		}
		hdr := &zip.FileHeader{Name: strings.TrimPrefix(e.Path, clean+"/"), Method: zip.Deflate, Modified: e.ModTime}
		fw, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := fw.Write(data); err != nil {
			return err
		}
	}
	return zw.Close()
}
