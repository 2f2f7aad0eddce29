package userfiles

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Limits of uploaded archives: an upload that is an archive is opened and
// refused when an entry would land outside its directory (zip-slip), when
// it holds too many entries, or when it would expand past maxExpanded or
// more than maxRatio times its own size (a bomb). Expansion is measured by
// decompressing, never trusted from the headers.
const (
	maxArchiveEntries = 10000
	maxExpanded       = 1 << 30
	maxRatio          = 100
)

// Upload refusals, each with its own code.
var (
	ErrTooLarge       = failure.New(failure.KindTooLarge, "file_too_large", "the file is larger than the upload limit")
	ErrUnsafeEntry    = failure.Unprocessable("unsafe_archive_entry", "the archive has an entry that would be written outside its directory")
	ErrArchiveBomb    = failure.Unprocessable("archive_bomb", "the archive expands far beyond its size")
	ErrBadArchive     = failure.Unprocessable("corrupt_archive", "the archive cannot be read")
	errExpandsTooMuch = errors.New("expands too much")
)

// CheckUpload refuses an oversized file and unsafe archives (.zip and
// zip-signed files, .tar, .tar.gz/.tgz, .gz).
func CheckUpload(name string, data []byte, maxBytes int64) error {
	if int64(len(data)) > maxBytes {
		return failure.New(failure.KindTooLarge, "file_too_large", "%s is %d bytes; the limit is %d", name, len(data), maxBytes)
	}
	lower := strings.ToLower(name)
	budget := min(int64(maxExpanded), max(int64(len(data))*maxRatio, 1<<20))
	switch {
	case strings.HasSuffix(lower, ".zip") || bytes.HasPrefix(data, []byte("PK\x03\x04")):
		return checkZip(data, budget)
	case strings.HasSuffix(lower, ".tar"):
		return checkTar(bytes.NewReader(data), budget)
	case strings.HasSuffix(lower, ".tar.gz") || strings.HasSuffix(lower, ".tgz"):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return ErrBadArchive
		}
		return checkTar(&limited{r: zr, left: budget}, budget)
	case strings.HasSuffix(lower, ".gz") || bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return ErrBadArchive
		}
		return drain(&limited{r: zr, left: budget})
	}
	return nil
}

// unsafeName reports an archive entry name that leaves its directory.
func unsafeName(n string) bool {
	n = strings.ReplaceAll(n, "\\", "/")
	if strings.HasPrefix(n, "/") || (len(n) > 1 && n[1] == ':') || strings.ContainsRune(n, 0) {
		return true
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

func checkZip(data []byte, budget int64) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return ErrBadArchive
	}
	if len(zr.File) > maxArchiveEntries {
		return ErrArchiveBomb
	}
	var declared uint64
	for _, f := range zr.File {
		if unsafeName(f.Name) || f.Mode()&0o170000 == 0o120000 { // symlink entries can point anywhere
			return ErrUnsafeEntry
		}
		declared += f.UncompressedSize64
	}
	if declared > uint64(budget) {
		return ErrArchiveBomb
	}
	lim := &limited{left: budget}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return ErrBadArchive
		}
		lim.r = rc
		err = drain(lim)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func checkTar(r io.Reader, budget int64) error {
	tr := tar.NewReader(r)
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, errExpandsTooMuch) {
			return ErrArchiveBomb
		}
		if err != nil {
			return ErrBadArchive
		}
		if n >= maxArchiveEntries || h.Size > budget {
			return ErrArchiveBomb
		}
		if unsafeName(h.Name) || h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
			return ErrUnsafeEntry
		}
	}
}

// limited counts expanded bytes and fails past its budget.
type limited struct {
	r    io.Reader
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errExpandsTooMuch
	}
	return n, err
}

func drain(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	switch {
	case errors.Is(err, errExpandsTooMuch):
		return ErrArchiveBomb
	case err != nil:
		return ErrBadArchive
	}
	return nil
}
