package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
)

type traceKey struct{}

// WithTraceparent returns ctx carrying a W3C traceparent for outgoing events.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, tp)
}

// TraceparentFrom returns the traceparent carried by ctx, or "".
func TraceparentFrom(ctx context.Context) string {
	tp, _ := ctx.Value(traceKey{}).(string)
	return tp
}

// NewTraceparent starts a new sampled trace: "00-<trace id>-<span id>-01".
func NewTraceparent() string {
	return "00-" + randHex(16) + "-" + randHex(8) + "-01"
}

// ChildTraceparent keeps parent's trace id with a new span id; a malformed or
// empty parent starts a new trace.
func ChildTraceparent(parent string) string {
	parts := strings.Split(parent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
		return NewTraceparent()
	}
	return parts[0] + "-" + parts[1] + "-" + randHex(8) + "-" + parts[3]
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
