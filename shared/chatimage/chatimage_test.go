package chatimage_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/chatimage"
	"github.com/yuxi-serverless/yuxi/shared/imagecheck/imagechecktest"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.NRGBA{B: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Uploads that no message references are removed after the grace period,
// object and row; referenced ones and young ones stay; an object left
// without a row (a crash between the sweep's two deletes, or a failed row
// insert) is removed once it is older than the grace period.
func TestSweepRemovesNeverReferencedUploads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	dir := t.TempDir()
	objects, err := blob.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := chatimage.New(pool, objects)
	upload := func() string {
		up, err := s.Upload(ctx, "u1", "a.png", bytes.NewReader(pngBytes(t, 10, 10)))
		if err != nil {
			t.Fatal(err)
		}
		return up.ImageID
	}
	stale, used, young := upload(), upload(), upload()
	// A message to reference: a thread of u1 with one user message.
	var msg int64
	if err := pool.QueryRow(ctx, `WITH c AS (INSERT INTO conversations (thread_id, uid, agent_id) VALUES ('t1', 'u1', 'default-chatbot') RETURNING id)
		INSERT INTO messages (conversation_id, role, content) SELECT id, 'user', 'look' FROM c RETURNING id`).Scan(&msg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Content(ctx, "u2", used); err == nil {
		t.Fatal("another user reads the image")
	}
	if err := s.Bind(ctx, "u1", used, msg); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(ctx, "u1", used, msg); err == nil {
		t.Fatal("an image bound twice")
	}
	if _, err := pool.Exec(ctx, `UPDATE chat_images SET created_at = now() - interval '2 hours' WHERE image_id IN ($1, $2)`, stale, used); err != nil {
		t.Fatal(err)
	}
	// An orphan object, old.
	orphan := chatimage.KeyPrefix + "0123456789abcdef0123456789abcdef.jpg"
	if _, err := objects.Put(ctx, orphan, bytes.NewReader([]byte("x")), 1, "image/jpeg"); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	aged := 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(path, "0123456789abcdef0123456789abcdef") {
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
			aged++
		}
		return nil
	})
	if aged == 0 {
		t.Fatal("orphan object file not found")
	}

	n, err := s.Sweep(ctx, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("swept %d objects, want 2 (the stale upload and the orphan)", n)
	}
	keys := map[string]bool{}
	list, _ := objects.List(ctx, chatimage.KeyPrefix)
	for _, o := range list {
		keys[o.Key] = true
	}
	for id, want := range map[string]bool{stale: false, used: true, young: true} {
		if keys[chatimage.KeyPrefix+id+".jpg"] != want {
			t.Errorf("image %s: object present = %v, want %v", id, !want, want)
		}
		var rows int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM chat_images WHERE image_id = $1`, id).Scan(&rows)
		if (rows == 1) != want {
			t.Errorf("image %s: row present = %v, want %v", id, rows == 1, want)
		}
	}
	if keys[orphan] {
		t.Error("the orphan object stayed")
	}
	// A second sweep has nothing to do.
	if n, err := s.Sweep(ctx, time.Hour, time.Now()); err != nil || n != 0 {
		t.Fatalf("second sweep: %d %v", n, err)
	}
}

func TestUploadChecksTypeAndSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	objects, _ := blob.NewLocal(t.TempDir())
	s := chatimage.New(pool, objects)
	if _, err := s.Upload(ctx, "u", "x.svg", bytes.NewReader([]byte("<svg/>"))); err != chatimage.ErrNotAnImage {
		t.Fatalf("svg: %v", err)
	}
	if _, err := s.Upload(ctx, "u", "x.png", bytes.NewReader(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, chatimage.MaxUploadBytes)...))); err != chatimage.ErrTooLarge {
		t.Fatalf("large: %v", err)
	}
	if _, err := s.Upload(ctx, "u", "x.png", bytes.NewReader([]byte("\x89PNG\r\n\x1a\ngarbage"))); err != chatimage.ErrBadImage {
		t.Fatalf("garbage: %v", err)
	}
	// WebP (a real lossless file built here), normalised like the others:
	// stored as JPEG, the colour kept, the longest side at most MaxSide.
	webp := imagechecktest.SolidWebP(3000, 1000, color.NRGBA{R: 250, G: 20, B: 20, A: 255})
	up, err := s.Upload(ctx, "u", "x.webp", bytes.NewReader(webp))
	if err != nil || up.Format != "webp" || up.MimeType != "image/jpeg" || up.Width != chatimage.MaxSide || up.Height != 682 {
		t.Fatalf("webp: %+v %v", up, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(up.ImageContent)
	img, err := jpeg.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if r, g, b, _ := img.At(100, 100).RGBA(); r>>8 < 230 || g>>8 > 40 || b>>8 > 40 {
		t.Fatalf("stored colour %d %d %d, want red", r>>8, g>>8, b>>8)
	}
	if _, err := s.Upload(ctx, "u", "x.webp", bytes.NewReader(webp[:len(webp)-3])); err != chatimage.ErrBadImage {
		t.Fatalf("truncated webp: %v", err)
	}
}
