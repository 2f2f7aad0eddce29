package kb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// TestObjectKeys pins the object-store layout: every key of a KB is under
// its ObjectPrefix (so a purge by prefix removes it), uploads name their
// file, and image links are the escaped key under the image route.
func TestObjectKeys(t *testing.T) {
	at := time.Unix(0, 1700000000123456789)
	up := kb.UploadKey("kb_1", "Report (v2).pdf", at)
	if up != "kb/kb_1/upload/1700000000123456789-Report (v2).pdf" {
		t.Fatalf("UploadKey = %q", up)
	}
	if !kb.IsUploadKey("kb_1", up) || kb.IsUploadKey("kb_2", up) || kb.IsUploadKey("kb_1", "kb/kb_1/files/f/content.md") {
		t.Fatal("IsUploadKey tells the wrong KB or kind")
	}
	if got := kb.UploadName(up); got != "Report (v2).pdf" {
		t.Fatalf("UploadName = %q", got)
	}
	for _, k := range []string{up, kb.MarkdownKey("kb_1", "f1"), kb.EditedMarkdownKey("kb_1", "f1", at), kb.ImageKey("kb_1", "f1", 7, "a b.png")} {
		if !strings.HasPrefix(k, kb.ObjectPrefix("kb_1")) || !kb.IsObjectKey("kb_1", k) {
			t.Fatalf("%q is not under the KB's prefix %q", k, kb.ObjectPrefix("kb_1"))
		}
	}
	if got := kb.MarkdownKey("kb_1", "f1"); got != "kb/kb_1/files/f1/content.md" {
		t.Fatalf("MarkdownKey = %q", got)
	}
	if got := kb.EditedMarkdownKey("kb_1", "f1", at); got != "kb/kb_1/files/f1/content-1700000000123456789.md" {
		t.Fatalf("EditedMarkdownKey = %q", got)
	}
	img := kb.ImageKey("kb_1", "f1", 7, "a b.png")
	if img != "kb/kb_1/files/f1/images/007-a b.png" {
		t.Fatalf("ImageKey = %q", img)
	}
	if got := kb.ImageURL("kb_1", img); got != "/api/knowledge/databases/kb_1/images/kb/kb_1/files/f1/images/007-a%20b.png" {
		t.Fatalf("ImageURL = %q", got)
	}
	for _, k := range []string{"kb/kb_10/x", "kb/kb_1/../kb_2/x", "other/kb/kb_1/x"} {
		if kb.IsObjectKey("kb_1", k) {
			t.Fatalf("IsObjectKey(kb_1, %q) = true", k)
		}
	}
}
