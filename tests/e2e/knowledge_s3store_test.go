package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The platform's own object store on an S3-protocol server
// (YUXI_BLOB_URI=s3://…): uploads, parsed Markdown and extracted images live
// in the bucket, and leave it with their document.

func TestKnowledgeS3ObjectStore(t *testing.T) {
	t.Parallel()
	s3 := testkit.NewFakeS3(t)
	p := testkit.StartLocal(t, s3.StoreEnv("yuxi-files", 5<<20))
	c := p.Admin
	bucket := s3.Bucket(t, "yuxi-files") // the operator's view of the bucket

	// Without YUXI_NOTIFY_TOKEN the bucket webhook is off.
	if r := c.Notify([]byte(`{"Records":[]}`), "Authorization", "Bearer x"); r.Status != http.StatusNotFound || r.Code() != "route_not_found" {
		t.Errorf("webhook without a token configured: %d %s", r.Status, r.Body)
	}

	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "field work", "description": "on S3"})["kb_id"].(string)
	md := []byte("# Onboarding\r\n\r\nNew hires receive a laptop on day one.\r\n\r\nCafé hours: 8–16.\r\n")
	pic := s3storePNG(t)
	// A Markdown bundle with an image and an 11 MiB stored (incompressible)
	// entry: its upload takes three 5 MiB parts.
	bundle := s3storeZip(t, map[string][]byte{
		"survey/README.md":         []byte("# Site survey\n\nThe survey found a cracked foundation.\n\n![east wall](east%20wall.png)\n"),
		"survey/east wall.png":     pic,
		"survey/raw/readings.bin":  s3storeRandom(t, 11<<20),
		"survey/raw/unrelated.txt": []byte("not part of the document"),
	})
	files := c.Ingest(kbID, map[string][]byte{"onboarding.md": md, "Site Survey.zip": bundle}, 30*time.Second)
	originals := map[string][]byte{"onboarding.md": md, "Site Survey.zip": bundle}
	ids := map[string]string{}
	for id, f := range files {
		if f["status"] != "indexed" {
			t.Fatalf("%s: %v", f["original_filename"], f)
		}
		ids[f["original_filename"].(string)] = id
	}
	k := bucketKB{t: t, p: p, c: c, kbID: kbID}
	if h := k.hits("laptop day one", ids["onboarding.md"]); len(h) == 0 {
		t.Error("the Markdown file is not searchable")
	}
	if h := k.hits("cracked foundation", ids["Site Survey.zip"]); len(h) == 0 {
		t.Error("the bundle is not searchable")
	}

	// The originals come back byte for byte, from the bucket.
	for name, want := range originals {
		r := c.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/"+ids[name]+"/download", nil)
		if r.Status != http.StatusOK || !bytes.Equal(r.Body, want) {
			t.Errorf("download %s: status %d, %d bytes (want %d, identical: %v)", name, r.Status, len(r.Body), len(want), bytes.Equal(r.Body, want))
		}
		if _, params, err := mime.ParseMediaType(r.Header.Get("Content-Disposition")); err != nil || params["filename"] != name {
			t.Errorf("download %s: Content-Disposition %q", name, r.Header.Get("Content-Disposition"))
		}
	}
	objects := s3storeKeys(t, bucket, "kb/"+kbID+"/")
	var uploads, markdown, images []string
	for _, key := range objects {
		switch {
		case strings.Contains(key, "/upload/"):
			uploads = append(uploads, key)
		case strings.HasSuffix(key, "/content.md"):
			markdown = append(markdown, key)
		case strings.Contains(key, "/images/"):
			images = append(images, key)
		}
	}
	if len(uploads) != 2 || len(markdown) != 2 || len(images) != 1 || len(objects) != 5 {
		t.Fatalf("bucket holds %q", objects)
	}
	// The extracted image is served from the bucket through the image route,
	// and the stored Markdown links to it.
	if r := c.Do("GET", "/api/knowledge/databases/"+kbID+"/images/"+images[0], nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, pic) {
		t.Errorf("image %s: %d, %d bytes", images[0], r.Status, len(r.Body))
	}
	var doc struct {
		Content string `json:"content"`
	}
	c.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/"+ids["Site Survey.zip"]+"/content", nil).Decode(t, &doc)
	link := "/api/knowledge/databases/" + kbID + "/images/" + strings.ReplaceAll(images[0], " ", "%20")
	if !strings.Contains(doc.Content, "![east wall]("+link+")") {
		t.Errorf("the bundle's Markdown does not link %s: %q", link, doc.Content)
	}
	if r := c.Do("GET", link, nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, pic) {
		t.Errorf("the Markdown's image link %s: %d, %d bytes", link, r.Status, len(r.Body))
	}

	// Deleting a document deletes its objects; the other's stay.
	c.OK("DELETE", "/api/knowledge/databases/"+kbID+"/documents/"+ids["Site Survey.zip"], nil)
	left := s3storeKeys(t, bucket, "kb/"+kbID+"/")
	if len(left) != 2 || strings.Contains(strings.Join(left, " "), ids["Site Survey.zip"]) || strings.Contains(strings.Join(left, " "), "Site Survey") {
		t.Errorf("after deleting the bundle the bucket holds %q", left)
	}
	if r := c.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/"+ids["Site Survey.zip"]+"/download", nil); r.Status != http.StatusNotFound {
		t.Errorf("download of a deleted document: %d %s", r.Status, r.Body)
	}
	c.OK("DELETE", "/api/knowledge/databases/"+kbID+"/documents/"+ids["onboarding.md"], nil)
	if left := s3storeKeys(t, bucket, "kb/"+kbID+"/"); len(left) != 0 {
		t.Errorf("after deleting every document the bucket holds %q", left)
	}
	if h := c.QueryKB(kbID, "laptop foundation", "hybrid"); len(h) != 0 {
		t.Errorf("deleted documents are still found: %v", h)
	}

	// Deleting a KB deletes its objects and its vector collection, and owes nothing.
	files = c.Ingest(kbID, map[string][]byte{"onboarding.md": md}, 30*time.Second)
	if len(s3storeKeys(t, bucket, "kb/"+kbID+"/")) == 0 {
		t.Fatal("the re-uploaded document stored nothing")
	}
	if r := c.OK("DELETE", "/api/knowledge/databases/"+kbID, nil); r["deleted"] != true {
		t.Errorf("delete KB: %v", r)
	}
	if left := s3storeKeys(t, bucket, "kb/"+kbID+"/"); len(left) != 0 {
		t.Errorf("after deleting the KB the bucket holds %q", left)
	}
	var collections, owed int
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM vector_collections WHERE name = $1),
		(SELECT count(*) FROM knowledge_base_purges WHERE kb_id = $1)`, kbID).Scan(&collections, &owed); err != nil || collections != 0 || owed != 0 {
		t.Errorf("after deleting the KB: %d vector collections, %d purges owed (%v)", collections, owed, err)
	}
}

func s3storeKeys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	list, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(list))
	for _, in := range list {
		out = append(out, in.Key)
	}
	return out
}

func s3storeZip(t *testing.T, entries map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range entries {
		method := zip.Deflate
		if strings.HasSuffix(name, ".bin") {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func s3storePNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 24, 16))
	for x := range 24 {
		for y := range 16 {
			img.Set(x, y, color.RGBA{uint8(x * 10), uint8(y * 15), 200, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func s3storeRandom(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		t.Fatal(err)
	}
	return b
}
