package runstream

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

// The harness itself: every event arrives, once, in order. No timing asserted.
func TestMeasureDeliveryLosesNothing(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := MeasureDelivery(ctx, rdb, Config{Prefix: prefix}, DeliveryOptions{
		Streams: 10, EventsPerStream: 20, Interval: 5 * time.Millisecond, IdleWindow: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 200 || st.Lost != 0 || st.OutOfOrder != 0 {
		t.Fatalf("%s", st)
	}
	t.Log(st)
}

// BenchmarkSSEDelivery measures event-appended → bytes-at-client latency with
// 200 concurrent SSE streams, against the bare XADD → XREAD floor of the same
// run (`make bench`: go test -run '^$' -bench SSEDelivery -benchtime 1x).
func BenchmarkSSEDelivery(b *testing.B) {
	rdb, prefix := redistest.New(b)
	for b.Loop() {
		st, err := MeasureDelivery(context.Background(), rdb, Config{Prefix: prefix}, DeliveryOptions{Streams: 200})
		if err != nil {
			b.Fatal(err)
		}
		if st.Lost != 0 || st.OutOfOrder != 0 {
			b.Fatalf("delivery broken: %s", st)
		}
		b.ReportMetric(float64(st.P50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(st.P99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(st.FloorP99.Microseconds())/1000, "floor-p99-ms")
		b.ReportMetric(float64(st.IdleReads), "idle-reads")
		b.Log(st)
	}
}
