package pdf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
)

func extractErr(data []byte) (Text, error) {
	return New().Extract(context.Background(), bytes.NewReader(data), int64(len(data)))
}

func wantErr(t *testing.T, data []byte, want error) {
	t.Helper()
	if _, err := extractErr(data); !errors.Is(err, want) {
		t.Errorf("Extract error = %v, want %v", err, want)
	}
}

func smallPDF(t testing.TB, compress bool) []byte {
	return buildPDF(t, []page{
		{runs: column(72, 700, 14, 12, "Page one has a line.", "And another.")},
		{runs: column(72, 700, 14, 12, "Page two.")},
	}, pdfOptions{compress: compress})
}

func TestEmptyFile(t *testing.T) {
	t.Parallel()
	wantErr(t, nil, ErrEmpty)
}

func TestNotAPDF(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"text": []byte("Just some notes, not a PDF at all.\n"),
		"png":  []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"),
		"zip":  []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantErr(t, data, ErrCorrupt)
		})
	}
}

func TestTruncatedAtEveryLength(t *testing.T) {
	t.Parallel()
	for _, compress := range []bool{false, true} {
		data := smallPDF(t, compress)
		// Every prefix that lacks the final %%EOF is a truncated file.
		end := bytes.LastIndex(data, []byte("%%EOF"))
		for n := 1; n < end+4; n++ {
			if _, err := extractErr(data[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("prefix of %d bytes: error %v, want ErrCorrupt", n, err)
			}
		}
	}
}

func TestGarbageAfterHeader(t *testing.T) {
	t.Parallel()
	wantErr(t, []byte("%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >> endobj\nstartxref\n999999\n%%EOF\n"), ErrCorrupt)
	wantErr(t, []byte("%PDF-1.4\n"+string(bytes.Repeat([]byte{0xff, 0x00, '(', '<'}, 200))+"\n%%EOF\n"), ErrCorrupt)
}

func TestCorruptContentStream(t *testing.T) {
	t.Parallel()
	// The only page cannot be decoded: the file is corrupt.
	wantErr(t, buildPDF(t, []page{{corrupt: true}}, pdfOptions{}), ErrCorrupt)

	// One bad page among good ones: reported for OCR, the rest extracted.
	text := extract(t, buildPDF(t, []page{
		{runs: column(72, 700, 14, 12, "Good page.")},
		{corrupt: true},
	}, pdfOptions{compress: true}))
	if text.Pages[0] != "Good page." || text.Pages[1] != "" {
		t.Errorf("pages = %q", text.Pages)
	}
	if len(text.ScannedPages) != 1 || text.ScannedPages[0] != 2 {
		t.Errorf("ScannedPages = %v, want [2]", text.ScannedPages)
	}
}

func TestCyclicPageTree(t *testing.T) {
	t.Parallel()
	d := &pdfDoc{}
	d.add("<< /Type /Catalog /Pages 2 0 R >>")
	d.add("<< /Type /Pages /Kids [2 0 R 3 0 R 2 0 R] /Count 1 >>")
	d.add("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>")
	wantErr(t, d.bytes("/Root 1 0 R"), ErrCorrupt)
}

func TestEncryptedFiles(t *testing.T) {
	t.Parallel()
	p := []page{{runs: column(72, 700, 14, 12, "Locked text.")}}
	// A password we do not have: only the /Encrypt dictionary is read.
	wantErr(t, buildPDF(t, p, pdfOptions{lockedEncrypt: true}), ErrEncrypted)
	// RC4 40-bit with an empty user password: readable in principle, but
	// the PDF library derives 40-bit object keys wrongly; refusing beats
	// returning garbage.
	wantErr(t, buildPDF(t, p, pdfOptions{encrypt: true, keyBits: 40}), ErrEncrypted)
	// A broken /Encrypt dictionary is still an encrypted file.
	d := &pdfDoc{}
	d.add("<< /Type /Catalog /Pages 2 0 R >>")
	d.add("<< /Type /Pages /Kids [] /Count 0 >>")
	d.add("<< /Filter /Standard /V 1 /R 2 >>")
	wantErr(t, d.bytes("/Root 1 0 R /Encrypt 3 0 R /ID [<00> <00>]"), ErrEncrypted)
}

func TestLimits(t *testing.T) {
	t.Parallel()
	data := smallPDF(t, false)
	e := New()
	e.MaxPages = 1
	if _, err := e.Extract(context.Background(), bytes.NewReader(data), int64(len(data))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxPages: error %v, want ErrTooLarge", err)
	}
	e = New()
	e.MaxBytes = int64(len(data)) - 1
	if _, err := e.Extract(context.Background(), bytes.NewReader(data), int64(len(data))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxBytes: error %v, want ErrTooLarge", err)
	}
}

// cancelOnRead cancels a context on its n-th read.
type cancelOnRead struct {
	io.ReaderAt
	mu     sync.Mutex
	n      int
	cancel context.CancelFunc
}

func (c *cancelOnRead) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	if c.n--; c.n == 0 {
		c.cancel()
	}
	c.mu.Unlock()
	return c.ReaderAt.ReadAt(p, off)
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	data := smallPDF(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().Extract(ctx, bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before: error %v", err)
	}
	// Cancelled while the file is being read: the page loop notices.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	r := &cancelOnRead{ReaderAt: bytes.NewReader(data), n: 3, cancel: cancel}
	if _, err := New().Extract(ctx, r, int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during: error %v", err)
	}
}

// TestMutatedFilesNeverPanic flips random bytes of valid files: whatever
// the damage, Extract returns text or one of its documented errors.
func TestMutatedFilesNeverPanic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, compress := range []bool{false, true} {
		orig := buildPDF(t, []page{twoColumnPage(), {image: true}}, pdfOptions{compress: compress})
		for i := 0; i < 400; i++ {
			data := bytes.Clone(orig)
			for k := 0; k < 1+rng.IntN(8); k++ {
				data[rng.IntN(len(data))] = byte(rng.IntN(256))
			}
			_, err := extractErr(data)
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrEncrypted) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("mutation %d: undocumented error %v", i, err)
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	data := buildPDF(t, []page{twoColumnPage()}, pdfOptions{compress: true})
	e := New()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, err := e.Extract(context.Background(), bytes.NewReader(data), int64(len(data)))
			if err == nil && text.Pages[0] != twoColWant {
				err = errors.New("wrong text")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestMeasurePagesPerSecond(t *testing.T) {
	t.Parallel()
	files := [][]byte{smallPDF(t, false), smallPDF(t, true)}
	pps, err := MeasurePagesPerSecond(context.Background(), files)
	if err != nil || pps <= 0 {
		t.Fatalf("MeasurePagesPerSecond = %v, %v", pps, err)
	}
	if _, err := MeasurePagesPerSecond(context.Background(), [][]byte{[]byte("nope")}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad file: error %v", err)
	}
}
