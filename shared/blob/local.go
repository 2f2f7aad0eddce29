package blob

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Local is the directory engine.
//
// # Layout
//
// Key "kb/42/report.pdf" is the file <dir>/kb~/42~/report.pdf: every segment
// but the last is a directory named after the segment plus "~", and the last
// is a regular file holding exactly the object's bytes. In segment names "%"
// is written "%25" and "~" is written "%7E", so a stored name never contains
// "~": an object file can never collide with a directory, and "a" and "a/b"
// can both exist, as in S3.
//
// # Metadata
//
// The content type and ETag (hex MD5 of the content) are extended attributes
// of the object file, user.yuxi.content_type and user.yuxi.etag (Linux ext4,
// xfs, btrfs, tmpfs ≥ 6.6, overlayfs on those; macOS; FreeBSD). NewLocal
// checks that the directory supports them. Because they live on the inode,
// content and metadata are replaced together by one rename. A file without
// the attributes (copied in by hand, or by a tool that drops them) reads as
// DefaultContentType with its MD5 computed on demand.
//
// # Writes
//
// Put writes "~tmp-<random>" in the object's directory, sets the attributes,
// fsyncs, renames it over the object and fsyncs the directory: readers see the
// old or the new file, never a torn one, and the last rename wins. Names with
// "~" other than directories are never listed, so a temp file left by a crash
// (SIGKILL mid-Put) is invisible; RemoveTemp, run by the dispatcher's sweep,
// deletes those older than a grace period.
//
// Every access goes through os.Root, so even a symbolic link placed in the
// directory cannot lead a key outside it. Keys are matched byte for byte;
// on a case-insensitive file system "A" and "a" are the same object.
//
// Get's reader is the open file: once returned it no longer watches ctx.
type Local struct {
	dir string
}

const (
	xattrContentType = "user.yuxi.content_type"
	xattrETag        = "user.yuxi.etag"
	tmpPrefix        = "~tmp-"
	dirSuffix        = "~"
	copyBufferSize   = 256 << 10
)

var (
	segmentEscaper   = strings.NewReplacer("%", "%25", "~", "%7E")
	segmentUnescaper = strings.NewReplacer("%25", "%", "%7E", "~")
)

// NewLocal returns a store kept in dir, creating the directory (mode 0700)
// when it does not exist. It fails when the file system there cannot hold
// user extended attributes.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("blob: local directory is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob: local directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("blob: create local directory: %w", err)
	}
	l := &Local{dir: abs}
	if err := l.probeXattr(); err != nil {
		return nil, fmt.Errorf("blob: %s cannot hold the content type and ETag as user extended attributes (use a file system that supports them, or the S3 engine): %w", abs, err)
	}
	return l, nil
}

// Dir returns the absolute directory of the store.
func (l *Local) Dir() string { return l.dir }

func (l *Local) probeXattr() error {
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	name := tmpPrefix + "probe-" + randomHex()
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer root.Remove(name)
	defer f.Close()
	if err := setXattr(f, xattrETag, "probe"); err != nil {
		return err
	}
	v, ok, err := getXattr(f, xattrETag)
	if err != nil {
		return err
	}
	if !ok || v != "probe" {
		return errors.New("extended attribute did not read back")
	}
	return nil
}

// Put implements Store.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	ct, err := contentTypeOrDefault(contentType)
	if err != nil {
		return Info{}, err
	}
	if err := checkSize(size); err != nil {
		return Info{}, err
	}
	rel, err := localPath(key)
	if err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return Info{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	defer root.Close()

	dir := filepath.Dir(rel)
	f, tmp, err := createTemp(root, dir)
	if err != nil {
		return Info{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = f.Close()
			_ = root.Remove(tmp)
		}
	}()

	h := md5.New()
	src := withContext(ctx, r)
	if size >= 0 {
		src = io.LimitReader(src, size)
	}
	n, err := io.CopyBuffer(io.MultiWriter(f, h), src, make([]byte, copyBufferSize))
	if err != nil {
		return Info{}, fmt.Errorf("blob: put %s: after %d bytes: %w", key, n, err)
	}
	if size >= 0 && n != size {
		return Info{}, fmt.Errorf("blob: put %s: reader ended after %d of %d bytes: %w", key, n, size, io.ErrUnexpectedEOF)
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if err := setXattr(f, xattrContentType, ct); err != nil {
		return Info{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := setXattr(f, xattrETag, etag); err != nil {
		return Info{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return Info{}, fmt.Errorf("blob: put %s: fsync: %w", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return Info{}, fmt.Errorf("blob: put %s: close: %w", key, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		return Info{}, fmt.Errorf("blob: put %s: rename: %w", key, err)
	}
	committed = true
	// The rename is durable only once the directory entry is on disk. The new
	// object is already visible; a caller seeing this error may Put again.
	if err := syncDir(root, dir); err != nil {
		return Info{}, fmt.Errorf("blob: put %s: fsync directory: %w", key, err)
	}
	return Info{Key: key, Size: st.Size(), ContentType: ct, ETag: etag, ModTime: st.ModTime()}, nil
}

// createTemp makes dir and an exclusive temp file in it. A concurrent Delete
// may prune the (momentarily empty) directory between the two steps, so a
// vanished directory is recreated a few times before giving up.
func createTemp(root *os.Root, dir string) (*os.File, string, error) {
	var err error
	for range 8 {
		if dir != "." {
			if err = root.MkdirAll(dir, 0o700); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, "", err
			}
		}
		tmp := filepath.Join(dir, tmpPrefix+randomHex())
		var f *os.File
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, tmp, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
	}
	return nil, "", err
}

func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	f, info, err := l.open(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	return f, info, nil
}

// Stat implements Store.
func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	f, info, err := l.open(ctx, key)
	if err != nil {
		return Info{}, err
	}
	_ = f.Close()
	return info, nil
}

// open opens the object file and describes it from the open descriptor, so
// the Info matches the bytes even if a Put replaces the object meanwhile.
func (l *Local) open(ctx context.Context, key string) (*os.File, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, err
	}
	rel, err := localPath(key)
	if err != nil {
		return nil, Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, Info{}, err
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return nil, Info{}, fmt.Errorf("blob: open %s: %w", key, err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		if isMissing(err) {
			return nil, Info{}, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, Info{}, fmt.Errorf("blob: open %s: %w", key, err)
	}
	info, err := describe(key, f, true)
	if err != nil {
		_ = f.Close()
		return nil, Info{}, err
	}
	return f, info, nil
}

// errNotRegular marks a path that exists but is not an object file.
var errNotRegular = errors.New("not a regular file")

// describe builds the Info of an open object file.
func describe(key string, f *os.File, withContentType bool) (Info, error) {
	st, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("blob: stat %s: %w", key, err)
	}
	if !st.Mode().IsRegular() {
		return Info{}, fmt.Errorf("%w: %s (%w)", ErrNotFound, key, errNotRegular)
	}
	info := Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}
	if withContentType {
		ct, ok, err := getXattr(f, xattrContentType)
		if err != nil {
			return Info{}, fmt.Errorf("blob: stat %s: %w", key, err)
		}
		if !ok || ct == "" {
			ct = DefaultContentType
		}
		info.ContentType = ct
	}
	etag, ok, err := getXattr(f, xattrETag)
	if err != nil {
		return Info{}, fmt.Errorf("blob: stat %s: %w", key, err)
	}
	if !ok || etag == "" {
		// Not written by Put: hash it (ReadAt keeps the file offset at 0).
		h := md5.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size())); err != nil {
			return Info{}, fmt.Errorf("blob: hash %s: %w", key, err)
		}
		etag = hex.EncodeToString(h.Sum(nil))
	}
	info.ETag = etag
	return info, nil
}

// Delete implements Store. Directories left empty are removed up to the root.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	rel, err := localPath(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	defer root.Close()
	st, err := root.Lstat(rel)
	if err != nil {
		if isMissing(err) {
			return nil
		}
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	if st.IsDir() {
		return nil // not an object (only a foreign directory can sit here)
	}
	if err := root.Remove(rel); err != nil && !isMissing(err) {
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	// Best effort: a non-empty directory refuses removal, which ends the walk.
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		if root.Remove(d) != nil {
			break
		}
	}
	return nil
}

// List implements Store.
func (l *Local) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	// Walk only the directory named by the prefix's complete segments.
	base := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = prefix[:i]
	}
	relBase := "."
	if base != "" {
		p, err := localDirPath(base)
		if err != nil {
			return nil, err
		}
		relBase = p
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
	}
	defer root.Close()
	sub, err := root.OpenRoot(relBase)
	if err != nil {
		if isMissing(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
	}
	defer sub.Close()

	keyOf := func(p string) string { // p: slash path under sub, already checked
		var b strings.Builder
		if base != "" {
			b.WriteString(base)
			b.WriteByte('/')
		}
		for i, seg := range strings.Split(p, "/") {
			if i > 0 {
				b.WriteByte('/')
			}
			b.WriteString(segmentUnescaper.Replace(strings.TrimSuffix(seg, dirSuffix)))
		}
		return b.String()
	}

	var out []Info
	err = fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isMissing(err) { // removed by a concurrent Delete
				return nil
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if p == "." {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if !strings.HasSuffix(name, dirSuffix) || strings.Count(name, dirSuffix) != 1 {
				return fs.SkipDir // not ours
			}
			dirKey := keyOf(p) + "/"
			if !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return fs.SkipDir
			}
			return nil
		}
		if strings.Contains(name, dirSuffix) || !d.Type().IsRegular() {
			return nil // temp file, or not ours
		}
		key := keyOf(p)
		if !strings.HasPrefix(key, prefix) || ValidateKey(key) != nil {
			return nil
		}
		f, err := sub.Open(filepath.FromSlash(p))
		if err != nil {
			if isMissing(err) {
				return nil
			}
			return err
		}
		info, err := describe(key, f, false)
		_ = f.Close()
		if err != nil {
			if errors.Is(err, errNotRegular) {
				return nil
			}
			return err
		}
		out = append(out, info)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// RemoveTemp deletes temp files ("~tmp-*") last modified more than olderThan
// ago — left by a process killed during a Put — and the directories that
// leaves empty; it returns how many files it removed. A Put in progress
// writes its temp file continuously, so its modification time stays recent;
// one stalled for longer than olderThan loses its temp file and fails at the
// rename, leaving the key as it was (the Put contract). Choose olderThan well
// above any Put's pauses (the sweep uses YUXI_FILE_LEASE).
func (l *Local) RemoveTemp(ctx context.Context, olderThan time.Duration) (int, error) {
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return 0, fmt.Errorf("blob: remove temp files: %w", err)
	}
	defer root.Close()
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	var dirs []string
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isMissing(err) {
				return nil
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		name := d.Name()
		if d.IsDir() {
			if p != "." && (!strings.HasSuffix(name, dirSuffix) || strings.Count(name, dirSuffix) != 1) {
				return fs.SkipDir // not ours
			}
			return nil
		}
		if !strings.HasPrefix(name, tmpPrefix) || !d.Type().IsRegular() {
			return nil
		}
		st, err := d.Info()
		if err != nil {
			if isMissing(err) {
				return nil
			}
			return err
		}
		if !st.ModTime().Before(cutoff) {
			return nil
		}
		rel := filepath.FromSlash(p)
		if err := root.Remove(rel); err != nil {
			if isMissing(err) {
				return nil
			}
			return err
		}
		removed++
		if dir := filepath.Dir(rel); dir != "." {
			dirs = append(dirs, dir)
		}
		return nil
	})
	// Best effort, as in Delete: a directory that is not empty (or that a Put
	// is filling right now) refuses removal, which ends that walk up.
	for _, d := range dirs {
		for ; d != "."; d = filepath.Dir(d) {
			if root.Remove(d) != nil {
				break
			}
		}
	}
	if err != nil {
		return removed, fmt.Errorf("blob: remove temp files: %w", err)
	}
	return removed, nil
}

// localPath maps a valid key to its file path relative to the root.
func localPath(key string) (string, error) {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		name := segmentEscaper.Replace(seg)
		if i < len(segs)-1 {
			name += dirSuffix
		}
		if len(name) > maxSegmentLen {
			return "", fmt.Errorf("%w: segment %.80q is %d bytes once escaped for a file name, more than %d", ErrInvalidKey, seg, len(name), maxSegmentLen)
		}
		segs[i] = name
	}
	return filepath.Join(segs...), nil
}

// localDirPath maps complete key segments (a List prefix's directory part)
// to the directory that holds their children.
func localDirPath(dirKey string) (string, error) {
	p, err := localPath(dirKey + "/x")
	if err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

// isMissing reports a path that does not exist, including one whose parent
// is a file (ENOTDIR).
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
