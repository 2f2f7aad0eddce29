package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The dispatcher's periodic sweep (the local runner's ticker here; a
// PingSource, EventBridge or Cloud Scheduler elsewhere) removes KB uploads
// never registered and chat images never sent once YUXI_UPLOAD_GRACE has
// passed; registered uploads stay.
func TestSweepRemovesUnusedUploadsAndChatImages(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, testkit.Env{"YUXI_UPLOAD_GRACE": "2s", "YUXI_FILE_GRACE": "1s"})
	admin := p.Admin
	kbID := admin.NewKnowledgeBase("sweep KB", "uploads swept", nil)
	kept := admin.UploadKB(kbID, "kept.md", []byte("# Kept\n\nregistered.\n"))
	stray := admin.UploadKB(kbID, "stray.md", []byte("# Stray\n\nnever registered.\n"))
	fileID := admin.AddDocuments(kbID, []string{kept}, nil)[0]
	img := admin.PostFile("/api/chat/image/upload", "dot.png", docparsetest.PNG())
	if img.Status != http.StatusOK {
		t.Fatalf("image upload: %d %s", img.Status, img.Body)
	}
	imageID := img.JSON()["image_id"].(string)
	ctx := context.Background()
	objs, err := blob.NewLocal(p.BlobDir)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var images int
		if err := p.P.App.Pool.QueryRow(ctx, `SELECT count(*) FROM chat_images WHERE image_id = $1`, imageID).Scan(&images); err != nil {
			t.Fatal(err)
		}
		_, serr := objs.Stat(ctx, stray)
		if images == 0 && errors.Is(serr, blob.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not swept: chat image rows %d, stray upload: %v", images, serr)
		}
		time.Sleep(200 * time.Millisecond) // polling the sweep's effect: it runs on a ticker, with no event to wait on
	}
	if r := admin.Do("POST", "/api/knowledge/databases/"+kbID+"/documents/add", map[string]any{"items": []string{stray}}); r.Status != http.StatusNotFound ||
		r.Code() != "upload_not_found" {
		t.Fatalf("register the swept upload: %d %s", r.Status, r.Body)
	}
	// The registered upload is still there: its content downloads.
	admin.WaitFile(kbID, fileID, 60*time.Second, "indexed")
	if r := admin.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/"+fileID+"/download", nil); r.Status != http.StatusOK {
		t.Fatalf("registered upload after the sweep: %d %s", r.Status, r.Body)
	}
}
