// Package blobtest is the contract test suite every blob.Store engine must
// pass. An engine's tests call Run with a constructor of empty stores:
//
//	blobtest.Run(t, func(t *testing.T) blob.Store { return newEmptyStore(t) })
//
// The suite checks behaviour a consumer relies on — round trips, overwrite,
// missing keys, key validation, listing, content types, atomic concurrent
// writes, streaming of large objects — and nothing engine-specific.
//
// Imported by: tests of shared/blob engines (and of any other Store
// implementation). May import: the standard library and shared/blob.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
)

// Option adjusts the suite.
type Option func(*config)

type config struct {
	largeSize int64
	heapBound int64
}

// DefaultLargeSize is the size of the object the streaming test writes.
const DefaultLargeSize = 50 << 20

// HeapBound sets how much the Go heap may grow while the large object is
// written or read; the default is half the object's size, i.e. the store must
// not hold the object in memory. n <= 0 turns the check off — for servers
// that run inside the test process (their storage shares the heap), where the
// content is still checked but memory cannot be attributed to the client.
func HeapBound(n int64) Option { return func(c *config) { c.heapBound = n } }

// Run runs every contract test as a subtest of t. newStore is called once per
// subtest and must return a store with no objects in it; it registers its own
// cleanup with t. The subtests run one after another: the streaming test
// measures the process's heap (and lowers GOGC while it does), so callers
// should not run Run in parallel with other tests.
func Run(t *testing.T, newStore func(t *testing.T) blob.Store, opts ...Option) {
	cfg := config{largeSize: DefaultLargeSize}
	cfg.heapBound = cfg.largeSize / 2
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s blob.Store)
	}{
		{"PutGetStat", testPutGetStat},
		{"Overwrite", testOverwrite},
		{"MissingKeys", testMissing},
		{"Delete", testDelete},
		{"List", testList},
		{"KeyAndItsPrefixCoexist", testKeyAndPrefix},
		{"UnusualCharacters", testUnusualCharacters},
		{"InvalidKeysRejected", testInvalidKeys},
		{"ContentTypeRoundTrip", testContentType},
		{"EmptyObject", testEmpty},
		{"UnknownSize", testUnknownSize},
		{"ShortReaderFailsAndKeepsOld", testShortReader},
		{"ExtraBytesNotStored", testExtraBytes},
		{"CancelledPut", testCancelled},
		{"ConcurrentPutsSameKey", testConcurrentPuts},
		{"LargeObjectStreamed", func(t *testing.T, s blob.Store) { testLarge(t, s, cfg) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// Put stores content at key in s (content type ct), failing t on error.
func Put(t *testing.T, s blob.Store, key, content, ct string) blob.Info {
	t.Helper()
	info, err := s.Put(t.Context(), key, strings.NewReader(content), int64(len(content)), ct)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

// Get reads key from s, failing t on error.
func Get(t *testing.T, s blob.Store, key string) (string, blob.Info) {
	t.Helper()
	rc, info, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b), info
}

// sameInfo compares everything but ModTime (Put may not know it).
func sameInfo(t *testing.T, what string, got, want blob.Info) {
	t.Helper()
	if got.Key != want.Key || got.Size != want.Size || got.ContentType != want.ContentType || got.ETag != want.ETag {
		t.Errorf("%s = %+v, want key/size/type/etag of %+v", what, got, want)
	}
}

func testPutGetStat(t *testing.T, s blob.Store) {
	const key, content, ct = "docs/readme.txt", "hello, blob", "text/plain; charset=utf-8"
	info := Put(t, s, key, content, ct)
	if info.Key != key || info.Size != int64(len(content)) || info.ContentType != ct || info.ETag == "" {
		t.Fatalf("Put info = %+v", info)
	}
	got, ginfo := Get(t, s, key)
	if got != content {
		t.Errorf("Get content = %q, want %q", got, content)
	}
	sameInfo(t, "Get info", ginfo, info)
	if ginfo.ModTime.IsZero() {
		t.Error("Get info has no ModTime")
	}
	sinfo, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	sameInfo(t, "Stat info", sinfo, info)
	if d := time.Since(sinfo.ModTime); d < -time.Hour || d > time.Hour {
		t.Errorf("Stat ModTime %v is not about now", sinfo.ModTime)
	}
}

func testOverwrite(t *testing.T, s blob.Store) {
	const key = "a/b/c.md"
	first := Put(t, s, key, "version one, longer", "text/markdown")
	second := Put(t, s, key, "v2", "text/plain")
	if first.ETag == second.ETag {
		t.Errorf("ETag did not change on new content: %q", first.ETag)
	}
	got, info := Get(t, s, key)
	if got != "v2" {
		t.Errorf("content after overwrite = %q", got)
	}
	sameInfo(t, "info after overwrite", info, second)
	again := Put(t, s, key, "v2", "text/plain")
	if again.ETag != second.ETag {
		t.Errorf("same content, different ETag: %q vs %q", again.ETag, second.ETag)
	}
	list, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Key != key || list[0].Size != 2 {
		t.Errorf("List after overwrite = %+v, want the one key", list)
	}
}

func testMissing(t *testing.T, s blob.Store) {
	ctx := t.Context()
	if _, _, err := s.Get(ctx, "no/such/key"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get missing: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "no/such/key"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat missing: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "no/such/key"); err != nil {
		t.Errorf("Delete missing: %v", err)
	}
	// A "directory" is not an object.
	Put(t, s, "dir/file.txt", "x", "")
	if _, err := s.Stat(ctx, "dir"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat of a key's parent: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.Get(ctx, "dir/file.txt/more"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get below an object: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "dir"); err != nil {
		t.Errorf("Delete of a key's parent: %v", err)
	}
	if got, _ := Get(t, s, "dir/file.txt"); got != "x" {
		t.Errorf("object changed by deleting its parent: %q", got)
	}
	list, err := s.List(ctx, "no/such/")
	if err != nil || len(list) != 0 {
		t.Errorf("List of a missing prefix = %v, %v; want empty, nil", list, err)
	}
}

func testDelete(t *testing.T, s blob.Store) {
	ctx := t.Context()
	Put(t, s, "d/one", "1", "")
	Put(t, s, "d/two", "2", "")
	Put(t, s, "d/sub/three", "3", "")
	for _, k := range []string{"d/one", "d/sub/three"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatalf("Delete(%q): %v", k, err)
		}
		if _, err := s.Stat(ctx, k); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat after Delete(%q): err = %v, want ErrNotFound", k, err)
		}
		if err := s.Delete(ctx, k); err != nil {
			t.Errorf("second Delete(%q): %v", k, err)
		}
	}
	list, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if keys := keysOf(list); !slices.Equal(keys, []string{"d/two"}) {
		t.Errorf("List after deletes = %v, want [d/two]", keys)
	}
	// A deleted key can be written again.
	Put(t, s, "d/sub/three", "3 again", "")
	if got, _ := Get(t, s, "d/sub/three"); got != "3 again" {
		t.Errorf("rewrite after delete = %q", got)
	}
}

func keysOf(list []blob.Info) []string {
	keys := make([]string, len(list))
	for i, in := range list {
		keys[i] = in.Key
	}
	return keys
}

func testList(t *testing.T, s blob.Store) {
	ctx := t.Context()
	objects := map[string]string{
		"kb/1":          "the key kb/1 itself",
		"kb/1/a.pdf":    "a",
		"kb/1/b/c.png":  "cc",
		"kb/10/x.md":    "xxx",
		"kb/2/y":        "yyyy",
		"kb-notes.txt":  "n",
		"other/z":       "zzzzz",
		"kb/1/b/d/e.md": "deep",
	}
	infos := map[string]blob.Info{}
	for k, v := range objects {
		infos[k] = Put(t, s, k, v, "text/plain")
	}
	cases := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"kb-notes.txt", "kb/1", "kb/1/a.pdf", "kb/1/b/c.png", "kb/1/b/d/e.md", "kb/10/x.md", "kb/2/y", "other/z"}},
		{"kb/1/", []string{"kb/1/a.pdf", "kb/1/b/c.png", "kb/1/b/d/e.md"}},
		{"kb/1", []string{"kb/1", "kb/1/a.pdf", "kb/1/b/c.png", "kb/1/b/d/e.md", "kb/10/x.md"}},
		{"kb", []string{"kb-notes.txt", "kb/1", "kb/1/a.pdf", "kb/1/b/c.png", "kb/1/b/d/e.md", "kb/10/x.md", "kb/2/y"}},
		{"kb/1/b/c", []string{"kb/1/b/c.png"}},
		{"kb/1/a.pdf", []string{"kb/1/a.pdf"}},
		{"kb/3/", nil},
		{"zzz", nil},
	}
	for _, c := range cases {
		list, err := s.List(ctx, c.prefix)
		if err != nil {
			t.Errorf("List(%q): %v", c.prefix, err)
			continue
		}
		if got := keysOf(list); !slices.Equal(got, c.want) {
			t.Errorf("List(%q) = %v, want %v", c.prefix, got, c.want)
		}
		for _, in := range list {
			want := infos[in.Key]
			if in.Size != want.Size || in.ETag != want.ETag || in.ModTime.IsZero() {
				t.Errorf("List(%q) entry %+v, want size %d etag %q and a ModTime", c.prefix, in, want.Size, want.ETag)
			}
			if in.ContentType != "" {
				t.Errorf("List(%q) entry %q has ContentType %q; the contract leaves it empty", c.prefix, in.Key, in.ContentType)
			}
		}
	}
}

func testKeyAndPrefix(t *testing.T, s blob.Store) {
	ctx := t.Context()
	Put(t, s, "files/f1", "original upload", "application/pdf")
	Put(t, s, "files/f1/parsed.md", "# parsed", "text/markdown")
	Put(t, s, "files/f1/images/1.png", "png", "image/png")
	if got, _ := Get(t, s, "files/f1"); got != "original upload" {
		t.Errorf("files/f1 = %q", got)
	}
	if got, _ := Get(t, s, "files/f1/parsed.md"); got != "# parsed" {
		t.Errorf("files/f1/parsed.md = %q", got)
	}
	if err := s.Delete(ctx, "files/f1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := Get(t, s, "files/f1/images/1.png"); got != "png" {
		t.Errorf("child after deleting parent key = %q", got)
	}
	Put(t, s, "files/f1", "again", "")
	list, err := s.List(ctx, "files/")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keysOf(list), []string{"files/f1", "files/f1/images/1.png", "files/f1/parsed.md"}; !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
}

func testUnusualCharacters(t *testing.T, s blob.Store) {
	keys := []string{
		"uploads/报告 2024 (final).pdf",
		"uploads/a+b=c&d.txt",
		"uploads/100%~tilde%7E~.txt",
		"uploads/hash#and?query.md",
		"uploads/colon:semi;comma,'quote\".txt",
		"uploads/.hidden",
		"uploads/...",
		"uploads/~",
		"uploads/emoji 📄.txt",
		"uploads/" + strings.Repeat("n", 255),
	}
	for i, k := range keys {
		content := fmt.Sprintf("content %d", i)
		Put(t, s, k, content, "text/plain")
		if got, info := Get(t, s, k); got != content || info.Key != k {
			t.Errorf("Get(%q) = %q (key %q), want %q", k, got, info.Key, content)
		}
	}
	list, err := s.List(t.Context(), "uploads/")
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if got := keysOf(list); !slices.Equal(got, want) {
		t.Errorf("List = %q\nwant %q", got, want)
	}
}

// InvalidKeys are keys every engine must reject with blob.ErrInvalidKey.
var InvalidKeys = []string{
	"",
	"/etc/passwd",
	"../outside",
	"a/../../outside",
	"a/..",
	"..",
	".",
	"./a",
	"a/./b",
	"a//b",
	"a/",
	"nul\x00byte",
	"ctl\x01char",
	"new\nline",
	"back\\slash",
	"..\\..\\windows",
	"bad-utf8-\xff",
	strings.Repeat("k", blob.MaxKeyLen+1),
	"seg/" + strings.Repeat("s", 256),
}

func testInvalidKeys(t *testing.T, s blob.Store) {
	ctx := t.Context()
	for _, k := range InvalidKeys {
		if err := blob.ValidateKey(k); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("ValidateKey(%.40q) = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Put(ctx, k, strings.NewReader("x"), 1, ""); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%.40q): err = %v, want ErrInvalidKey", k, err)
		}
		if _, _, err := s.Get(ctx, k); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Get(%.40q): err = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Stat(ctx, k); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Stat(%.40q): err = %v, want ErrInvalidKey", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Delete(%.40q): err = %v, want ErrInvalidKey", k, err)
		}
	}
	for _, p := range []string{"/abs", "../", "a/../", "a//", "x\x00", "back\\"} {
		if _, err := s.List(ctx, p); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("List(%q): err = %v, want ErrInvalidKey", p, err)
		}
	}
	list, err := s.List(ctx, "")
	if err != nil || len(list) != 0 {
		t.Errorf("store after rejected Puts: %v, %v; want empty", keysOf(list), err)
	}
}

func testContentType(t *testing.T, s blob.Store) {
	ctx := t.Context()
	types := map[string]string{
		"ct/pdf":     "application/pdf",
		"ct/md":      "text/markdown; charset=utf-8",
		"ct/png":     "image/png",
		"ct/docx":    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		"ct/default": "",
	}
	for k, ct := range types {
		info := Put(t, s, k, "body of "+k, ct)
		want := ct
		if want == "" {
			want = blob.DefaultContentType
		}
		if info.ContentType != want {
			t.Errorf("Put(%q) ContentType = %q, want %q", k, info.ContentType, want)
		}
		if st, err := s.Stat(ctx, k); err != nil || st.ContentType != want {
			t.Errorf("Stat(%q) ContentType = %q, %v; want %q", k, st.ContentType, err, want)
		}
		if _, gi := Get(t, s, k); gi.ContentType != want {
			t.Errorf("Get(%q) ContentType = %q, want %q", k, gi.ContentType, want)
		}
	}
	for _, bad := range []string{"text/plain\r\nX-Injected: 1", "a\x00b", strings.Repeat("t", 300)} {
		if _, err := s.Put(ctx, "ct/bad", strings.NewReader("x"), 1, bad); !errors.Is(err, blob.ErrInvalidContentType) {
			t.Errorf("Put with content type %.30q: err = %v, want ErrInvalidContentType", bad, err)
		}
	}
	if _, err := s.Stat(ctx, "ct/bad"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("rejected Put stored an object: %v", err)
	}
}

func testEmpty(t *testing.T, s blob.Store) {
	info := Put(t, s, "empty", "", "")
	if info.Size != 0 || info.ETag == "" {
		t.Errorf("Put empty = %+v", info)
	}
	got, gi := Get(t, s, "empty")
	if got != "" || gi.Size != 0 {
		t.Errorf("Get empty = %q, %+v", got, gi)
	}
}

func testUnknownSize(t *testing.T, s blob.Store) {
	content := strings.Repeat("unknown size ", 10000) // 130 kB
	info, err := s.Put(t.Context(), "unknown", onlyReader{strings.NewReader(content)}, -1, "text/plain")
	if err != nil {
		t.Fatalf("Put size -1: %v", err)
	}
	if info.Size != int64(len(content)) {
		t.Errorf("Put size -1: Size = %d, want %d", info.Size, len(content))
	}
	if got, gi := Get(t, s, "unknown"); got != content || gi.Size != int64(len(content)) {
		t.Errorf("Get after size -1 Put: %d bytes (info %d), want %d", len(got), gi.Size, len(content))
	}
	if _, err := s.Put(t.Context(), "bad-size", strings.NewReader("x"), -2, ""); err == nil {
		t.Error("Put with size -2 succeeded")
	}
}

// onlyReader hides every method but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func testShortReader(t *testing.T, s blob.Store) {
	Put(t, s, "short", "old content", "text/plain")
	_, err := s.Put(t.Context(), "short", onlyReader{strings.NewReader("only ten b")}, 1000, "text/plain")
	if err == nil {
		t.Fatal("Put with a reader shorter than size succeeded")
	}
	if got, _ := Get(t, s, "short"); got != "old content" {
		t.Errorf("content after failed Put = %q, want the old content", got)
	}
	_, err = s.Put(t.Context(), "short-new", onlyReader{strings.NewReader("tiny")}, 100, "")
	if err == nil {
		t.Fatal("Put with a reader shorter than size succeeded")
	}
	if _, err := s.Stat(t.Context(), "short-new"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("failed Put of a new key left an object: %v", err)
	}
}

func testExtraBytes(t *testing.T, s blob.Store) {
	info, err := s.Put(t.Context(), "extra", onlyReader{strings.NewReader("hello world")}, 5, "")
	if err != nil {
		t.Fatalf("Put with extra bytes: %v", err)
	}
	if got, _ := Get(t, s, "extra"); got != "hello" || info.Size != 5 {
		t.Errorf("stored %q (size %d), want the first 5 bytes", got, info.Size)
	}
}

func testCancelled(t *testing.T, s blob.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, "cancelled", strings.NewReader("x"), 1, ""); err == nil {
		t.Error("Put with a cancelled context succeeded")
	}
	// A Put cancelled part way: the reader cancels after the first chunk.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	r := &cancelAfter{r: newGenerator(1, 8<<20), n: 1 << 20, cancel: cancel}
	if _, err := s.Put(ctx, "cancelled", r, 8<<20, ""); err == nil {
		t.Error("Put cancelled mid-stream succeeded")
	}
	// The store must stop reading at the cancellation itself, not whenever
	// its transport notices: bytes read after it could still complete the
	// upload (the race behind "cancelled Put left an object" under load).
	if after := r.afterCancel.Load(); after != 0 {
		t.Errorf("Put read %d bytes after its context was cancelled", after)
	}
	if _, err := s.Stat(t.Context(), "cancelled"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("cancelled Put left an object: %v", err)
	}
}

// cancelAfter calls cancel once n bytes have been read, and counts the
// bytes read after that. A Put may read it from another goroutine (the
// HTTP transport's writer).
type cancelAfter struct {
	r           io.Reader
	n           int64
	read        int64
	cancel      func()
	cancelled   atomic.Bool
	afterCancel atomic.Int64
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.cancelled.Load() {
		c.afterCancel.Add(int64(n))
	}
	c.read += int64(n)
	if c.read >= c.n && !c.cancelled.Load() {
		c.cancelled.Store(true)
		c.cancel()
	}
	return n, err
}

func testConcurrentPuts(t *testing.T, s blob.Store) {
	const (
		key     = "race/same-key"
		writers = 8
		rounds  = 3
		size    = 256 << 10
	)
	content := func(w int) string { return strings.Repeat(string(rune('A'+w)), size) }
	typeOf := func(w int) string { return fmt.Sprintf("application/x-writer-%d", w) }

	ctx := t.Context()
	var wg sync.WaitGroup
	var done atomic.Bool
	var etags sync.Map // writer → ETag seen with its content
	errs := make(chan error, writers*rounds+64)
	for w := range writers {
		wg.Go(func() {
			for range rounds {
				c := content(w)
				if _, err := s.Put(ctx, key, strings.NewReader(c), int64(len(c)), typeOf(w)); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
				}
			}
		})
	}
	// Readers check every version they see is whole and self-consistent.
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for !done.Load() {
				if err := checkWhole(ctx, s, key, size, content, typeOf, &etags); err != nil && !errors.Is(err, blob.ErrNotFound) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := checkWhole(ctx, s, key, size, content, typeOf, &etags); err != nil {
		t.Errorf("final object: %v", err)
	}
	list, err := s.List(ctx, "race/")
	if err != nil || len(list) != 1 {
		t.Errorf("List after concurrent puts = %v, %v; want exactly the one key (no temp files)", keysOf(list), err)
	}
}

// checkWhole reads key and verifies it is exactly one writer's content, with
// that writer's content type and the ETag seen with that content before.
func checkWhole(ctx context.Context, s blob.Store, key string, size int, content func(int) string, typeOf func(int) string, etags *sync.Map) error {
	rc, info, err := s.Get(ctx, key)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if len(b) != size || info.Size != int64(size) {
		return fmt.Errorf("torn object: %d bytes (info %d), want %d", len(b), info.Size, size)
	}
	w := int(b[0] - 'A')
	if !bytes.Equal(b, []byte(content(w))) {
		return fmt.Errorf("torn object: mixed content starting with writer %d", w)
	}
	if info.ContentType != typeOf(w) {
		return fmt.Errorf("content of writer %d with content type %q: metadata and data disagree", w, info.ContentType)
	}
	if prev, loaded := etags.LoadOrStore(w, info.ETag); loaded && prev != info.ETag {
		return fmt.Errorf("content of writer %d with ETag %q, earlier %q: metadata and data disagree", w, info.ETag, prev)
	}
	return nil
}

func testLarge(t *testing.T, s blob.Store, cfg config) {
	size := cfg.largeSize
	const key = "large/object.bin"
	ctx := t.Context()

	src := newGenerator(42, size)
	want := sha256.New()
	var peak int64
	info, err := func() (blob.Info, error) {
		stop := watchHeap(&peak)
		defer stop()
		return s.Put(ctx, key, io.TeeReader(src, want), size, "application/octet-stream")
	}()
	if err != nil {
		t.Fatalf("Put %d bytes: %v", size, err)
	}
	if info.Size != size {
		t.Fatalf("Put Size = %d, want %d", info.Size, size)
	}
	t.Logf("Put %d MiB: heap grew by at most %.1f MiB%s", size>>20, float64(peak)/(1<<20), boundNote(cfg))
	if cfg.heapBound > 0 && peak > cfg.heapBound {
		t.Errorf("Put of %d MiB grew the heap by %.1f MiB (bound %.1f MiB): the object is not streamed",
			size>>20, float64(peak)/(1<<20), float64(cfg.heapBound)/(1<<20))
	}
	wantSum := want.Sum(nil)

	peak = 0
	var n int64
	got := sha256.New()
	func() {
		stop := watchHeap(&peak)
		defer stop()
		rc, ginfo, err := s.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		defer rc.Close()
		if ginfo.Size != size {
			t.Errorf("Get Size = %d, want %d", ginfo.Size, size)
		}
		n, err = io.CopyBuffer(got, rc, make([]byte, 64<<10))
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	}()
	t.Logf("Get %d MiB: heap grew by at most %.1f MiB%s", size>>20, float64(peak)/(1<<20), boundNote(cfg))
	if n != size || !bytes.Equal(got.Sum(nil), wantSum) {
		t.Errorf("read back %d bytes, sha256 %x; want %d bytes, %x", n, got.Sum(nil), size, wantSum)
	}
	if cfg.heapBound > 0 && peak > cfg.heapBound {
		t.Errorf("Get of %d MiB grew the heap by %.1f MiB (bound %.1f MiB): the object is not streamed",
			size>>20, float64(peak)/(1<<20), float64(cfg.heapBound)/(1<<20))
	}
	if st, err := s.Stat(ctx, key); err != nil || st.Size != size {
		t.Errorf("Stat = %+v, %v", st, err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

func boundNote(cfg config) string {
	if cfg.heapBound <= 0 {
		return " (not checked: HeapBound off)"
	}
	return fmt.Sprintf(" (bound %.1f MiB)", float64(cfg.heapBound)/(1<<20))
}

// watchHeap samples the live heap until stop is called and stores its
// largest growth over the starting level in *peak. GC runs more often while
// it watches, so garbage does not count as growth.
func watchHeap(peak *int64) (stop func()) {
	old := debug.SetGCPercent(10)
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	base := read()
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if d := read() - base; d > *peak {
				*peak = d
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		debug.SetGCPercent(old)
	}
}

// generator yields size deterministic pseudo-random bytes without holding
// them: a xorshift stream, so content is not compressible or repetitive.
type generator struct {
	state uint64
	off   int64
	size  int64
}

func newGenerator(seed uint64, size int64) *generator {
	return &generator{state: seed*0x9E3779B97F4A7C15 + 1, size: size}
}

func (g *generator) Read(p []byte) (int, error) {
	if g.off >= g.size {
		return 0, io.EOF
	}
	if int64(len(p)) > g.size-g.off {
		p = p[:g.size-g.off]
	}
	for i := range p {
		k := g.off % 8
		if k == 0 {
			g.state ^= g.state << 13
			g.state ^= g.state >> 7
			g.state ^= g.state << 17
		}
		p[i] = byte(g.state >> (8 * k))
		g.off++
	}
	return len(p), nil
}
