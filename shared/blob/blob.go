// Package blob stores files — uploads, parsed Markdown, extracted images,
// thread files — behind one small interface, Store, with two engines:
//
//   - Local (NewLocal): a directory on the local file system, the embedded
//     default for `make run`.
//   - S3 (NewS3): any S3-protocol service through minio-go — MinIO, AWS S3,
//     Google Cloud Storage's XML interoperability API.
//
// Open / OpenWith pick an engine from a URI (the format is documented on
// OpenWith), so main can turn one configuration string into a Store.
//
// # Contract (every engine; checked by the blobtest suite)
//
//   - Keys are slash-separated relative paths; ValidateKey states the rules.
//     An invalid key is rejected with ErrInvalidKey before any I/O, so a
//     user-influenced name can never address anything outside the store.
//   - Put is atomic: readers see the old object or the new one, never a
//     partial one, and concurrent Puts of one key leave exactly one of them
//     (last writer wins). Put reads exactly size bytes from r (size -1: until
//     EOF); a reader that ends early fails the Put and leaves the key as it
//     was. Bytes beyond size are not read. Put stops reading r as soon as
//     ctx is done, so a cancelled Put leaves the key as it was — unless the
//     cancellation came after the last byte was sent, which for a remote
//     store is a true race (the object may have been stored).
//   - No engine ever exposes a partial object, and none leaves garbage
//     forever: Local's temp files of a dead process are removed by
//     Local.RemoveTemp (the dispatcher's sweep); S3 objects appear whole or
//     not at all (see S3.Put).
//   - Get and Stat return ErrNotFound (wrapped) for a missing key; Delete of a
//     missing key succeeds.
//   - Info.ETag is an opaque change token: it changes when the content does.
//     Local and single-part S3 uploads use the hex MD5 of the content;
//     multipart S3 uploads use S3's "<md5 of part md5s>-<parts>" form.
//   - Info.ContentType defaults to DefaultContentType. List reports Key, Size,
//     ETag and ModTime only (S3 listings carry no content type): use Stat.
//   - List(prefix) is a flat, recursive listing of every key that starts with
//     prefix (a plain string prefix, as in S3), sorted by key.
//   - Large objects are streamed: neither engine holds a whole object in
//     memory (S3 buffers at most one part, S3Config.PartSize).
//
// Imported by: functions (intake uploads, doc-parse, kb-index) and the local
// runner. May import: the standard library, golang.org/x/sys/unix, minio-go.
// It must not import other shared packages or events.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Store is the object store as its consumers see it.
type Store interface {
	// Put stores size bytes read from r under key (size -1: read to EOF) and
	// returns the stored object's Info. An empty contentType means
	// DefaultContentType. On error the key keeps its previous content.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error)
	// Get opens the object for reading; the caller closes the reader. The Info
	// describes exactly the bytes the reader returns. ErrNotFound when missing.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat describes the object. ErrNotFound when missing.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns every object whose key starts with prefix, sorted by key.
	// ContentType is left empty; use Stat when it is needed.
	List(ctx context.Context, prefix string) ([]Info, error)
}

// Info describes a stored object.
type Info struct {
	Key         string
	Size        int64
	ContentType string
	ETag        string
	// ModTime is when the object was last written. Put on S3 may leave it zero
	// (S3 does not report it on upload); Stat always sets it.
	ModTime time.Time
}

// DefaultContentType is stored when Put is given no content type.
const DefaultContentType = "application/octet-stream"

// MaxKeyLen is the longest key, in bytes (S3's limit).
const MaxKeyLen = 1024

// maxSegmentLen bounds one path segment: a file name on common file systems.
const maxSegmentLen = 255

// maxContentTypeLen bounds a content type (an HTTP header value and an
// extended attribute on Local).
const maxContentTypeLen = 255

var (
	// ErrNotFound is returned (wrapped) by Get and Stat for a missing key.
	ErrNotFound = errors.New("blob: object not found")
	// ErrInvalidKey is returned (wrapped, with the reason) for a key or prefix
	// that breaks the rules of ValidateKey.
	ErrInvalidKey = errors.New("blob: invalid key")
	// ErrInvalidContentType is returned (wrapped) by Put for a content type
	// with control characters or longer than 255 bytes.
	ErrInvalidContentType = errors.New("blob: invalid content type")
)

// ValidateKey reports whether key may name an object, with ErrInvalidKey and
// the reason when it may not. The rules are the same for every engine, so a
// key accepted by one is accepted by all:
//
//   - 1 to MaxKeyLen (1024) bytes of valid UTF-8;
//   - slash-separated segments: no leading or trailing "/", no empty segment
//     ("a//b"), no "." or ".." segment, each segment at most 255 bytes;
//   - no NUL or other control character (U+0000–U+001F, U+007F), no "\".
//
// Callers building keys from user-supplied file names should still choose
// the directory part themselves and use the user's name only as the last
// segment; ValidateKey guarantees containment, not meaning.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	if err := checkChars(key); err != nil {
		return err
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("%w: %.80q starts with /", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := checkSegment(key, seg); err != nil {
			return err
		}
	}
	return nil
}

// validatePrefix checks a List prefix: "" lists everything; otherwise every
// complete segment (one followed by "/") obeys the key rules and the last,
// possibly partial, segment obeys the character rules.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxKeyLen {
		return fmt.Errorf("%w: prefix of %d bytes, more than %d", ErrInvalidKey, len(prefix), MaxKeyLen)
	}
	if err := checkChars(prefix); err != nil {
		return err
	}
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("%w: prefix %.80q starts with /", ErrInvalidKey, prefix)
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] {
		if err := checkSegment(prefix, seg); err != nil {
			return err
		}
	}
	if last := segs[len(segs)-1]; len(last) > maxSegmentLen {
		return fmt.Errorf("%w: segment of %d bytes in %.80q, more than %d", ErrInvalidKey, len(last), prefix, maxSegmentLen)
	}
	return nil
}

func checkChars(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %.80q is not valid UTF-8", ErrInvalidKey, s)
	}
	for _, c := range s {
		switch {
		case c == 0:
			return fmt.Errorf("%w: %.80q contains NUL", ErrInvalidKey, s)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("%w: %.80q contains a control character", ErrInvalidKey, s)
		case c == '\\':
			return fmt.Errorf("%w: %.80q contains a backslash", ErrInvalidKey, s)
		}
	}
	return nil
}

func checkSegment(key, seg string) error {
	switch {
	case seg == "":
		return fmt.Errorf("%w: %.80q has an empty segment (leading, trailing or doubled /)", ErrInvalidKey, key)
	case seg == "." || seg == "..":
		return fmt.Errorf("%w: %.80q has a %q segment", ErrInvalidKey, key, seg)
	case len(seg) > maxSegmentLen:
		return fmt.Errorf("%w: segment of %d bytes in %.80q, more than %d", ErrInvalidKey, len(seg), key, maxSegmentLen)
	}
	return nil
}

// contentTypeOrDefault validates ct and applies DefaultContentType.
func contentTypeOrDefault(ct string) (string, error) {
	if ct == "" {
		return DefaultContentType, nil
	}
	if len(ct) > maxContentTypeLen {
		return "", fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidContentType, len(ct), maxContentTypeLen)
	}
	if !utf8.ValidString(ct) {
		return "", fmt.Errorf("%w: %.80q is not valid UTF-8", ErrInvalidContentType, ct)
	}
	for _, c := range ct {
		if c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("%w: %.80q contains a control character", ErrInvalidContentType, ct)
		}
	}
	return ct, nil
}

// checkSize rejects sizes other than -1 (unknown) and non-negative counts.
func checkSize(size int64) error {
	if size < -1 {
		return fmt.Errorf("blob: invalid size %d (want -1 for unknown or a byte count)", size)
	}
	return nil
}

// readerFunc adapts a function to io.Reader.
type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// withContext stops a copy between reads once ctx is done, so a cancelled Put
// of a large object does not run to the end.
func withContext(ctx context.Context, r io.Reader) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return r.Read(p)
	})
}
