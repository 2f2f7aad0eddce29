package main

// Copied from tests/bench (a package main there, so not importable); keep the two in step.

import (
	"fmt"
	"slices"
	"time"
)

// samples are latencies of one kind of operation.
type samples []time.Duration

// sorted returns a sorted copy.
func (s samples) sorted() samples {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// pct is the nearest-rank percentile p (0 < p ≤ 100): the smallest sample
// with at least p% of the samples at or below it. Zero when empty.
func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s.sorted()
	i := int(float64(len(c))*p/100+0.999999) - 1
	return c[max(0, min(i, len(c)-1))]
}

func (s samples) p50() time.Duration { return s.pct(50) }
func (s samples) p99() time.Duration { return s.pct(99) }

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func durRatio(a, b time.Duration) float64 { return ratio(float64(a), float64(b)) }

// ms formats a duration in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
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

// x formats a ratio.
func x(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// mb formats a byte count in MiB.
func mb(b int64) string { return fmt.Sprintf("%.1fMB", float64(b)/(1<<20)) }
