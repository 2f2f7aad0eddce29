package benchkit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Samples are latencies of one kind of operation.
type Samples []time.Duration

// Sorted returns a sorted copy.
func (s Samples) Sorted() Samples {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// Pct is the nearest-rank percentile p (0 < p ≤ 100): the smallest sample
// with at least p% of the samples at or below it. Zero when empty.
func (s Samples) Pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s.Sorted()
	i := int(float64(len(c))*p/100+0.999999) - 1
	return c[max(0, min(i, len(c)-1))]
}

// P50 is the median.
func (s Samples) P50() time.Duration { return s.Pct(50) }

// P99 is the 99th percentile.
func (s Samples) P99() time.Duration { return s.Pct(99) }

// Concurrently runs op perWorker times in each of workers goroutines, all
// started together, and returns every latency. It stops at the first error.
func Concurrently(ctx context.Context, workers, perWorker int, op func(ctx context.Context, worker, i int) (time.Duration, error)) (Samples, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		all      = make(Samples, 0, workers*perWorker)
		firstErr error
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			local := make(Samples, 0, perWorker)
			for i := range perWorker {
				d, err := op(ctx, w, i)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				local = append(local, d)
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return all, firstErr
}

// Ratio is a/b, or 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// DurRatio is a/b of two durations, or 0 when b is 0.
func DurRatio(a, b time.Duration) float64 { return Ratio(float64(a), float64(b)) }

// Ms formats a duration in milliseconds with a precision that suits its size.
func Ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fms", v)
	}
}

// X formats a ratio.
func X(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// MB formats a byte count in MiB.
func MB(b int64) string { return fmt.Sprintf("%.1fMB", float64(b)/(1<<20)) }
