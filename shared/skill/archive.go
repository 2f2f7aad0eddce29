package skill

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Limits bound what an archive from a user may unpack to. Zero fields take
// the defaults.
type Limits struct {
	MaxArchive int64 // compressed bytes (default 20 MiB)
	MaxEntries int   // files and directories (default 1000)
	MaxDepth   int   // path segments of an entry (default 12)
	MaxTotal   int64 // uncompressed bytes, all files (default 50 MiB)
	MaxFile    int64 // uncompressed bytes, one file (default 10 MiB)
	MaxRatio   int64 // uncompressed ÷ compressed, whole archive and each entry (default 100)
}

func (l Limits) withDefaults() Limits {
	if l.MaxArchive <= 0 {
		l.MaxArchive = 20 << 20
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 1000
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 12
	}
	if l.MaxTotal <= 0 {
		l.MaxTotal = 50 << 20
	}
	if l.MaxFile <= 0 {
		l.MaxFile = 10 << 20
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = 100
	}
	return l
}

// Archive refusal codes (each a 422 unless said otherwise).
const (
	CodeArchiveInvalid  = "archive_invalid"           // not a zip archive
	CodeArchiveTooLarge = "archive_too_large"         // compressed, total or one file over the limit (413)
	CodeArchiveEntries  = "archive_too_many_entries"  // more entries than allowed
	CodeArchiveDepth    = "archive_too_deep"          // an entry nested deeper than allowed
	CodeArchiveUnsafe   = "archive_path_unsafe"       // absolute path, "..", backslash or NUL (zip-slip)
	CodeArchiveSymlink  = "archive_symlink"           // a symbolic link (or any non-regular entry)
	CodeArchiveRatio    = "archive_compression_ratio" // uncompressed ÷ compressed above the limit
)

func refuse(code, format string, args ...any) error {
	return failure.Unprocessable(code, format, args...)
}

// Unzip reads a zip archive from a user into files, refusing before it
// writes anything: zip-slip paths, symlinks and other special entries,
// too many entries, too deep, too large (declared or actually read: sizes
// in headers are not trusted) and compression ratios beyond the limit.
// Directory entries are dropped (directories are implied by files).
func Unzip(data []byte, lim Limits) ([]File, error) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxArchive {
		return nil, failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "the archive is %d bytes (limit %d)", len(data), lim.MaxArchive)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, refuse(CodeArchiveInvalid, "not a zip archive: %v", err)
	}
	if len(zr.File) > lim.MaxEntries {
		return nil, refuse(CodeArchiveEntries, "the archive has %d entries (limit %d)", len(zr.File), lim.MaxEntries)
	}
	// Check every header first, then read.
	seen := map[string]bool{}
	for _, f := range zr.File {
		name := f.Name
		if err := checkEntryPath(name, lim.MaxDepth); err != nil {
			return nil, err
		}
		mode := f.Mode()
		if t := mode.Type(); t != 0 && t != fs.ModeDir {
			return nil, refuse(CodeArchiveSymlink, "entry %q is a %s, not a regular file", name, kindOf(mode.Type().String()))
		}
		clean := path.Clean(name)
		if seen[clean] && !mode.IsDir() {
			return nil, refuse(CodeArchiveUnsafe, "entry %q appears twice", name)
		}
		seen[clean] = true
	}
	var out []File
	var total int64
	for _, f := range zr.File {
		if f.Mode().IsDir() || strings.HasSuffix(f.Name, "/") {
			continue
		}
		if int64(f.UncompressedSize64) > lim.MaxFile || f.UncompressedSize64 > 1<<62 {
			return nil, failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "entry %q is %d bytes (limit %d)", f.Name, f.UncompressedSize64, lim.MaxFile)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, refuse(CodeArchiveInvalid, "entry %q: %v", f.Name, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, lim.MaxFile+1))
		rc.Close()
		if err != nil {
			return nil, refuse(CodeArchiveInvalid, "entry %q: %v", f.Name, err)
		}
		if int64(len(b)) > lim.MaxFile {
			return nil, failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "entry %q unpacks to more than %d bytes", f.Name, lim.MaxFile)
		}
		if c := int64(f.CompressedSize64); len(b) > 1<<16 && (c == 0 || int64(len(b))/max(c, 1) > lim.MaxRatio) {
			return nil, refuse(CodeArchiveRatio, "entry %q unpacks %d bytes from %d (ratio limit %d)", f.Name, len(b), c, lim.MaxRatio)
		}
		total += int64(len(b))
		if total > lim.MaxTotal {
			return nil, failure.New(failure.KindTooLarge, CodeArchiveTooLarge, "the archive unpacks to more than %d bytes", lim.MaxTotal)
		}
		out = append(out, File{Path: path.Clean(f.Name), Data: b})
	}
	if total > 1<<16 && total/max(int64(len(data)), 1) > lim.MaxRatio {
		return nil, refuse(CodeArchiveRatio, "the archive unpacks %d bytes from %d (ratio limit %d)", total, len(data), lim.MaxRatio)
	}
	return out, nil
}

func kindOf(s string) string {
	if strings.HasPrefix(s, "L") {
		return "symbolic link"
	}
	return "special file (" + s + ")"
}

// checkEntryPath refuses a path that could land outside the target
// directory, and one nested deeper than maxDepth.
func checkEntryPath(name string, maxDepth int) error {
	switch {
	case name == "" || strings.ContainsRune(name, 0):
		return refuse(CodeArchiveUnsafe, "entry %q has an empty or NUL name", name)
	case strings.Contains(name, `\`):
		return refuse(CodeArchiveUnsafe, "entry %q has a backslash", name)
	case strings.HasPrefix(name, "/") || (len(name) > 1 && name[1] == ':'):
		return refuse(CodeArchiveUnsafe, "entry %q is an absolute path", name)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if seg == ".." {
			return refuse(CodeArchiveUnsafe, "entry %q escapes the archive (..)", name)
		}
	}
	if d := len(strings.Split(strings.Trim(name, "/"), "/")); d > maxDepth {
		return refuse(CodeArchiveDepth, "entry %q is %d levels deep (limit %d)", name, d, maxDepth)
	}
	return nil
}

// Zip writes files into a zip archive below dir (the export format: the
// archive's root is the skill's directory).
func Zip(dir string, files []File) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(path.Join(dir, f.Path))
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("zip skill: %w", err)
	}
	return buf.Bytes(), nil
}

// skillDirs finds the skills in unpacked files: every directory holding a
// SKILL.md, each with its files relative to it.
func skillDirs(files []File) map[string][]File {
	dirs := map[string][]File{}
	for _, f := range files {
		if path.Base(f.Path) == "SKILL.md" {
			dirs[path.Dir(f.Path)] = nil
		}
	}
	for _, f := range files {
		for d := range dirs {
			if d == "." {
				dirs[d] = append(dirs[d], f)
				continue
			}
			if rest, ok := strings.CutPrefix(f.Path, d+"/"); ok {
				dirs[d] = append(dirs[d], File{Path: rest, Data: f.Data})
			}
		}
	}
	return dirs
}
