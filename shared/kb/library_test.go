package kb_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// textTypes stands in for the document parsers' file types: Markdown and
// text, whose content must not hold NUL bytes.
type textTypes struct{}

func (textTypes) Extensions() []string { return []string{".md", ".txt"} }

func (textTypes) Detect(name string, head []byte) error {
	if bytes.IndexByte(head, 0) >= 0 {
		return errors.New(name + " is not text")
	}
	return nil
}

// library returns the use cases over e's database and engines, with a local
// object store of the test's own.
func (e *env) library(t *testing.T) (*kb.Library, *blob.Local) {
	t.Helper()
	objs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return kb.NewLibrary(kb.LibraryDeps{Store: e.store, Objects: objs, Outbox: e.ob, Keyword: e.kw, Vectors: e.vec,
		Types: textTypes{}}), objs
}

// file is an open func of Library.Upload.
func file(name, content string) func() (string, io.Reader, error) {
	return func() (string, io.Reader, error) { return name, strings.NewReader(content), nil }
}

// keysUnder lists the stored keys under prefix.
func keysUnder(t *testing.T, objs blob.Store, prefix string) []string {
	t.Helper()
	list, err := objs.List(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range list {
		out = append(out, o.Key)
	}
	return out
}

// tooLargeBody reads some bytes, then fails as a transport that refused a
// larger body does.
type tooLargeBody struct{ n int }

func (b *tooLargeBody) Read(p []byte) (int, error) {
	if b.n > 8192 {
		return 0, kb.ErrTooLarge
	}
	n := min(len(p), 1024)
	for i := range p[:n] {
		p[i] = 'a'
	}
	b.n += n
	return n, nil
}

// testLibraryUploadAndRegister: an upload is stored under the KB's upload
// prefix with its hash; refused uploads leave no object; the same content
// twice is a conflict whose second object is deleted; Register adds the
// uploads (with their hash, computed when the client sent none) and emits
// document.uploaded only when asked to parse.
func testLibraryUploadAndRegister(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	other := e.createKB(t, kb.CreateInput{})
	lib, objs := e.library(t)
	uploads := kb.ObjectPrefix(k.KBID) + "upload/"

	opened := false
	_, err := lib.Upload(e.ctx, user("stranger"), k.KBID, func() (string, io.Reader, error) {
		opened = true
		return "a.md", strings.NewReader("x"), nil
	})
	wantErr(t, err, kb.ErrNotFound)
	if opened {
		t.Fatal("the body was read for a caller without access")
	}

	up, err := lib.Upload(e.ctx, owner, k.KBID, file(`dir\Notes.md`, "# notes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !kb.IsUploadKey(k.KBID, up.Key) || kb.UploadName(up.Key) != "Notes.md" || up.Filename != "notes.md" ||
		up.OriginalFilename != "Notes.md" || up.ContentHash != hashOf("# notes\n") || up.Size != 8 || up.SameNameFiles == nil ||
		len(up.SameNameFiles) != 0 {
		t.Fatalf("upload = %+v", up)
	}

	_, err = lib.Upload(e.ctx, owner, k.KBID, file("run.exe", "MZ"))
	wantCode(t, err, failure.KindUnsupportedMedia, "unsupported_file_type")
	_, err = lib.Upload(e.ctx, owner, k.KBID, file("empty.md", ""))
	wantCode(t, err, failure.KindUnprocessable, "empty_file")
	_, err = lib.Upload(e.ctx, owner, k.KBID, file("bin.md", "a\x00b"))
	wantCode(t, err, failure.KindUnsupportedMedia, "wrong_file_type")
	_, err = lib.Upload(e.ctx, owner, k.KBID, func() (string, io.Reader, error) { return "big.md", &tooLargeBody{}, nil })
	wantErr(t, err, kb.ErrTooLarge)
	if got := keysUnder(t, objs, uploads); !slices.Equal(got, []string{up.Key}) {
		t.Fatalf("objects after refused uploads = %v", got)
	}

	_, err = lib.Register(e.ctx, owner, k.KBID, kb.RegisterInput{Items: []string{kb.UploadKey(other.KBID, "x.md", time.Now())}})
	wantCode(t, err, failure.KindUnprocessable, "invalid_items")
	_, err = lib.Register(e.ctx, owner, k.KBID, kb.RegisterInput{Items: []string{kb.UploadKey(k.KBID, "gone.md", time.Now())}})
	wantCode(t, err, failure.KindNotFound, "upload_not_found")
	_, err = lib.Register(e.ctx, owner, k.KBID, kb.RegisterInput{})
	wantCode(t, err, failure.KindUnprocessable, "invalid_items")

	files, err := lib.Register(e.ctx, owner, k.KBID, kb.RegisterInput{Items: []string{up.Key}, Parse: true})
	if err != nil {
		t.Fatal(err)
	}
	f := files[0]
	if f.Filename != "notes.md" || f.ContentHash == nil || *f.ContentHash != up.ContentHash || f.Status != kb.StatusUploaded {
		t.Fatalf("registered = %+v", f)
	}
	if got := e.events(t, f.FileID); !slices.Equal(got, []string{events.TypeDocumentUploaded}) {
		t.Fatalf("events = %v", got)
	}

	// The same content again: refused, and its object deleted again.
	_, err = lib.Upload(e.ctx, owner, k.KBID, file("copy.md", "# notes\n"))
	wantCode(t, err, failure.KindConflict, "duplicate_content")
	if got := keysUnder(t, objs, uploads); !slices.Equal(got, []string{up.Key}) {
		t.Fatalf("objects after a duplicate = %v", got)
	}

	// Another content of the same name: accepted, and the name is reported.
	again, err := lib.Upload(e.ctx, owner, k.KBID, file("NOTES.md", "# other notes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.SameNameFiles, []string{f.FileID}) {
		t.Fatalf("same-name files = %v, want %s", again.SameNameFiles, f.FileID)
	}
	files, err = lib.Register(e.ctx, owner, k.KBID, kb.RegisterInput{Items: []string{again.Key},
		ContentHashes: map[string]string{again.Key: again.ContentHash}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.events(t, files[0].FileID); len(got) != 0 {
		t.Fatalf("a file registered without parsing has events %v", got)
	}
}

// parsedWithObjects uploads, registers and parses a file the way doc-parse
// does: its Markdown and one image stored at their keys.
func (e *env) parsedWithObjects(t *testing.T, lib *kb.Library, objs blob.Store, kbID, name, md string) kb.File {
	t.Helper()
	up, err := lib.Upload(e.ctx, owner, kbID, file(name, md))
	if err != nil {
		t.Fatal(err)
	}
	files, err := lib.Register(e.ctx, owner, kbID, kb.RegisterInput{Items: []string{up.Key}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.store.ClaimParse(e.ctx, files[0].FileID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mdKey, imgKey := kb.MarkdownKey(kbID, f.FileID), kb.ImageKey(kbID, f.FileID, 1, "fig.png")
	for key, content := range map[string]string{mdKey: md, imgKey: "png"} {
		if _, err := objs.Put(e.ctx, key, strings.NewReader(content), int64(len(content)), ""); err != nil {
			t.Fatal(err)
		}
	}
	e.tx(t, func(tx pgx.Tx, emit outbox.Emit) error {
		return e.store.FinishParseTx(e.ctx, tx, emit, f, mdKey, []kb.Image{{ObjectKey: imgKey, ContentType: "image/png", Size: 3}})
	})
	return e.load(t, f.FileID)
}

// testLibraryRemoveFilesAndDeleteKB: removing a file deletes its row, its
// vectors and its objects (original, Markdown, images); deleting the KB
// deletes every object under its prefix and leaves no purge owed.
func testLibraryRemoveFilesAndDeleteKB(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	lib, objs := e.library(t)
	if err := e.vec.EnsureCollection(e.ctx, k.KBID, testDim); err != nil {
		t.Fatal(err)
	}
	gone := e.parsedWithObjects(t, lib, objs, k.KBID, "gone.md", "gone words\n")
	cs, _ := e.index(t, gone.FileID, "gone words")
	if err := e.vec.Upsert(e.ctx, k.KBID, []vector.Item{{ID: cs[0].ID, Group: gone.FileID, Vector: []float32{1, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	kept := e.parsedWithObjects(t, lib, objs, k.KBID, "kept.md", "kept words\n")

	_, err := lib.RemoveFiles(e.ctx, user("stranger"), k.KBID, []string{gone.FileID})
	wantErr(t, err, kb.ErrNotFound)
	_, err = lib.RemoveFiles(e.ctx, owner, k.KBID, nil)
	wantCode(t, err, failure.KindUnprocessable, "invalid_file_ids")

	deleted, err := lib.RemoveFiles(e.ctx, owner, k.KBID, []string{gone.FileID})
	if err != nil || !slices.Equal(deleted, []string{gone.FileID}) {
		t.Fatalf("RemoveFiles = %v, %v", deleted, err)
	}
	if _, err := e.store.LoadFile(e.ctx, gone.FileID); !errors.Is(err, kb.ErrFileNotFound) {
		t.Fatalf("removed file still loads: %v", err)
	}
	if hits, _ := e.vec.Search(e.ctx, k.KBID, []float32{1, 0, 0}, 10, nil); len(hits) != 0 || len(e.owedDeletes(t, k.KBID)) != 0 {
		t.Fatalf("vectors after removal = %v, owed %v", hits, e.owedDeletes(t, k.KBID))
	}
	for _, key := range keysUnder(t, objs, kb.ObjectPrefix(k.KBID)) {
		if strings.Contains(key, gone.FileID) || key == *gone.ObjectKey {
			t.Fatalf("object %s of the removed file is left", key)
		}
	}
	if len(keysUnder(t, objs, kb.ObjectPrefix(k.KBID)+"files/"+kept.FileID+"/")) != 2 {
		t.Fatal("the kept file's objects went too")
	}

	_, err = lib.DeleteKB(e.ctx, user("stranger"), k.KBID)
	wantErr(t, err, kb.ErrNotFound)
	if _, err := lib.DeleteKB(e.ctx, owner, k.KBID); err != nil {
		t.Fatal(err)
	}
	_, err = lib.KB(e.ctx, owner, k.KBID)
	wantErr(t, err, kb.ErrNotFound)
	if left := keysUnder(t, objs, kb.ObjectPrefix(k.KBID)); len(left) != 0 {
		t.Fatalf("objects left after deleting the KB: %v", left)
	}
	var owed int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM knowledge_base_purges WHERE kb_id = $1`, k.KBID).Scan(&owed); err != nil || owed != 0 {
		t.Fatalf("purges owed = %d, %v", owed, err)
	}
}

// testLibraryEditMarkdown: an edit at a stale revision changes nothing and
// leaves no object; an edit at the current revision replaces the Markdown
// under a key of its own and deletes the replaced one.
func testLibraryEditMarkdown(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	lib, objs := e.library(t)
	f := e.parsedWithObjects(t, lib, objs, k.KBID, "doc.md", "old text\n")
	filePrefix := kb.ObjectPrefix(k.KBID) + "files/" + f.FileID + "/"
	d, err := lib.Document(e.ctx, owner, k.KBID, f.FileID)
	if err != nil || d.Markdown != "old text\n" || d.File.Revision() != f.Revision() {
		t.Fatalf("document = %+v, %v", d, err)
	}

	_, err = lib.EditMarkdown(e.ctx, owner, k.KBID, f.FileID, "new text", "2000-01-01T00:00:00Z")
	wantCode(t, err, failure.KindConflict, "revision_conflict")
	_, err = lib.EditMarkdown(e.ctx, owner, k.KBID, f.FileID, "  ", f.Revision())
	wantCode(t, err, failure.KindInvalid, "empty_content")
	_, err = lib.EditMarkdown(e.ctx, owner, k.KBID, f.FileID, "new text", "yesterday")
	wantCode(t, err, failure.KindInvalid, "invalid_revision")
	if got := keysUnder(t, objs, filePrefix); len(got) != 2 || got[0] != kb.MarkdownKey(k.KBID, f.FileID) {
		t.Fatalf("objects after refused edits = %v", got)
	}

	edited, err := lib.EditMarkdown(e.ctx, owner, k.KBID, f.FileID, "new text", f.Revision())
	if err != nil {
		t.Fatal(err)
	}
	if edited.Revision() == f.Revision() || edited.Status != kb.StatusParsed {
		t.Fatalf("edited = %+v", edited)
	}
	d, err = lib.Document(e.ctx, owner, k.KBID, f.FileID)
	if err != nil || d.Markdown != "new text" {
		t.Fatalf("document after the edit = %q, %v", d.Markdown, err)
	}
	got := keysUnder(t, objs, filePrefix)
	if len(got) != 2 || !strings.HasPrefix(got[0], filePrefix+"content-") || *edited.MarkdownKey != got[0] {
		t.Fatalf("objects after the edit = %v (Markdown at %s)", got, *edited.MarkdownKey)
	}
}

// testLibraryImage: an image is served by its key to readers of its KB,
// with the content type recorded at extraction; keys outside the KB are refused.
func testLibraryImage(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	lib, objs := e.library(t)
	f := e.parsedWithObjects(t, lib, objs, k.KBID, "pic.md", "![fig](fig.png)\n")
	key := kb.ImageKey(k.KBID, f.FileID, 1, "fig.png")

	rc, info, err := lib.Image(e.ctx, owner, k.KBID, key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(rc)
	rc.Close()
	if string(body) != "png" || info.ContentType != "image/png" || info.Size != 3 {
		t.Fatalf("image = %q, %+v", body, info)
	}
	_, _, err = lib.Image(e.ctx, user("stranger"), k.KBID, key)
	wantErr(t, err, kb.ErrNotFound)
	_, _, err = lib.Image(e.ctx, owner, k.KBID, kb.ObjectPrefix(k.KBID)+"../x/secret.png")
	wantCode(t, err, failure.KindInvalid, "invalid_image_path")
	_, _, err = lib.Image(e.ctx, owner, k.KBID, kb.MarkdownKey(k.KBID, f.FileID))
	wantCode(t, err, failure.KindNotFound, "image_not_found")
}
