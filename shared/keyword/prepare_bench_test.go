package keyword

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"
)

// scifactDocs loads the SciFact corpus (skips when absent) as documents.
func scifactDocs(tb testing.TB) []Doc {
	f, err := openSciFact()
	if err != nil {
		tb.Skip("SciFact corpus not present:", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var docs []Doc
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var d struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			tb.Fatal(err)
		}
		docs = append(docs, Doc{ID: d.ID, Text: d.Title + "\n\n" + d.Text})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return docs
}

// openSciFact opens the SciFact corpus: shared/datasets beside the
// checkout (a worktree) or in it.
func openSciFact() (*os.File, error) {
	f, err := os.Open("../../../shared/datasets/scifact/corpus.jsonl.gz")
	if err != nil {
		f, err = os.Open("../datasets/scifact/corpus.jsonl.gz")
	}
	return f, err
}

func BenchmarkPrepareDocs(b *testing.B) {
	docs := scifactDocs(b)
	an := NewAnalyzer("auto")
	prepareDocs(an, docs) // warm the stem cache, as a running process has it
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		prepareDocs(an, docs)
	}
	// Process CPU time: on a loaded machine wall time mostly measures waiting.
	b.ReportMetric(float64((cpuTime()-c0).Milliseconds())/float64(b.N), "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
