package sandboxtool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// minerU is a protocol-level fake of a self-hosted mineru-api: POST
// /file_parse with the document as the multipart "files" part.
func minerU(t *testing.T, calls *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/file_parse" || r.ParseMultipartForm(32<<20) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f, fh, err := r.FormFile("files")
		if err != nil {
			http.Error(w, "no files part", http.StatusUnprocessableEntity)
			return
		}
		data, _ := io.ReadAll(f)
		if !bytes.HasPrefix(data, []byte("\x89PNG")) {
			http.Error(w, "not a PNG", http.StatusUnprocessableEntity)
			return
		}
		calls.Add(1)
		stem := strings.TrimSuffix(fh.Filename, ".png")
		_ = json.NewEncoder(w).Encode(map[string]any{"results": map[string]any{stem: map[string]any{"md_content": "# Invoice 7\n\nTotal: 42 EUR\n"}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOCRParseFileWritesMarkdownToOutputs(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ocr, err := docparse.NewOCR(docparse.EngineMinerU, minerU(t, &calls).URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := docparse.New(docparse.NewPDFTextLayer(), docparse.Options{OCR: ocr, OCREngine: docparse.EngineMinerU})
	parse := func(ctx context.Context, name string, data []byte) (string, error) {
		res, err := p.Parse(ctx, name, bytes.NewReader(data), int64(len(data)))
		return res.Markdown, err
	}
	w := provisionertest.Start(t, provisioner.Config{})
	k := &kit{w: w, tools: map[string]tool.Tool{}, scope: sandbox.Scope{UID: "alice", FileThread: "thread-1"}}
	for _, tl := range sandboxtool.New(w.Client, sandboxtool.Config{ExecTimeout: 30 * time.Second, Parse: parse, OCREngine: docparse.EngineMinerU}) {
		k.tools[tl.Spec().Name] = tl
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 64)...)
	if _, err := w.Client.WriteFile(context.Background(), k.scope, "uploads/invoice.png", png, false); err != nil {
		t.Fatal(err)
	}
	res := k.call(t, "ocr_parse_file", map[string]any{"file_path": "/home/gem/user-data/uploads/invoice.png"})
	if res.IsError || !strings.HasPrefix(res.Output, "Parsed /home/gem/user-data/uploads/invoice.png to /home/gem/user-data/outputs/ocr/invoice.md") ||
		!strings.Contains(res.Output, "Total: 42 EUR") {
		t.Fatalf("ocr_parse_file: %+v", res)
	}
	if got, err := os.ReadFile(w.HostPath(k.scope, sandbox.OutputsDir+"/ocr/invoice.md")); err != nil || !strings.Contains(string(got), "# Invoice 7") {
		t.Fatalf("outputs/ocr/invoice.md: %q %v", got, err)
	}
	for args, want := range map[string]string{
		`{"file_path":"/etc/passwd"}`:                          "not under",
		`{"file_path":"uploads/../../../etc/passwd"}`:          "not under",
		`{"file_path":"/home/gem/skills/x/SKILL.md"}`:          "not under",
		`{"file_path":"uploads/missing.pdf"}`:                  "not_found",
		`{"file_path":"uploads/invoice.png","ocr_engine":"x"}`: "not available",
	} {
		var m map[string]any
		_ = json.Unmarshal([]byte(args), &m)
		if r := k.call(t, "ocr_parse_file", m); !r.IsError || !strings.Contains(r.Output, want) {
			t.Errorf("%s: %+v, want an error naming %q", args, r, want)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("the OCR service was called %d times, want 1", calls.Load())
	}
}
