package pdf

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Benchmarks: pages per second on a generated 50-page two-column document,
// ours and pdftotext's (when installed) on the same file. Run with
//
//	go test -run '^$' -bench . ./shared/docparse/pdf/
//
// The platform's benchmark harness calls MeasurePagesPerSecond instead.

// denseDocument writes pages of two justified-looking columns of 10 pt
// Helvetica, 56 lines each, with a running title: about 900 words a page.
func denseDocument(tb testing.TB, pages int) []byte {
	words := strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there all one word text column page reading order extraction layout paragraph document benchmark glyph font baseline gutter")
	rng := rand.New(rand.NewPCG(7, 11))
	line := func() string {
		var b strings.Builder
		w := 0.0
		for {
			word := words[rng.IntN(len(words))]
			ww := 0.0
			for _, r := range word + " " {
				ww += helveticaWidth(r) / 100
			}
			if w+ww > 215 {
				return b.String()
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(word)
			w += ww
		}
	}
	var ps []page
	for p := 0; p < pages; p++ {
		var left, right []string
		for i := 0; i < 56; i++ {
			left = append(left, line())
			right = append(right, line())
		}
		runs := []run{{x: 200, y: 750, size: 14, text: fmt.Sprintf("Generated benchmark document, page %d", p+1)}}
		runs = append(runs, column(60, 720, 12, 10, left...)...)
		runs = append(runs, column(320, 720, 12, 10, right...)...)
		ps = append(ps, page{runs: runs})
	}
	return buildPDF(tb, ps, pdfOptions{compress: true})
}

func BenchmarkExtract50Pages(b *testing.B) {
	data := denseDocument(b, 50)
	e := New()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := e.Extract(context.Background(), bytes.NewReader(data), int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(50*b.N)/time.Since(start).Seconds(), "pages/s")
}

func BenchmarkPdftotext50Pages(b *testing.B) {
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		b.Skip("pdftotext not installed")
	}
	in := filepath.Join(b.TempDir(), "dense.pdf")
	if err := os.WriteFile(in, denseDocument(b, 50), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := exec.Command(bin, "-q", in, os.DevNull).Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(50*b.N)/time.Since(start).Seconds(), "pages/s")
}

func TestDenseDocumentReadsColumnByColumn(t *testing.T) {
	t.Parallel()
	text := extract(t, denseDocument(t, 2))
	if len(text.Pages) != 2 {
		t.Fatalf("%d pages", len(text.Pages))
	}
	// 1 title + 56 + 56 lines; the columns' lines never merge.
	lines := strings.Split(text.Pages[0], "\n")
	if !strings.HasPrefix(lines[0], "Generated benchmark document, page 1") || len(lines) != 1+1+56+56 {
		t.Errorf("unexpected layout: %d lines, first %q", len(lines), lines[0])
	}
}
