package events

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Source returns the CloudEvents source of a function, e.g. "/yuxi/agent-step".
func Source(function string) string { return "/yuxi/" + function }

// NewID returns a random event id.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New builds a CloudEvent carrying p, with the runid/threadid extensions set
// from the payload and traceparent when given.
func New(source, id string, p Payload, traceparent string) (cloudevents.Event, error) {
	ev := cloudevents.NewEvent()
	ev.SetID(id)
	ev.SetSource(source)
	ev.SetType(p.EventType())
	if err := ev.SetData(cloudevents.ApplicationJSON, p); err != nil {
		return ev, fmt.Errorf("encode %s: %w", p.EventType(), err)
	}
	if c, ok := p.(Correlated); ok {
		runID, threadID := c.Correlation()
		if runID != "" {
			ev.SetExtension(ExtRunID, runID)
		}
		if threadID != "" {
			ev.SetExtension(ExtThreadID, threadID)
		}
	}
	if traceparent != "" {
		ev.SetExtension(ExtTraceparent, traceparent)
	}
	return ev, nil
}

// Lenient is implemented by payloads another party defines (cloud storage
// events): Decode then ignores fields the struct does not declare.
type Lenient interface{ AllowUnknownFields() }

// Decode strictly decodes data into a payload of type T: unknown fields are
// an error, except for Lenient payloads. Schema validation is the receiver's
// job (see shared/faas).
func Decode[T Payload](data []byte) (T, error) {
	var p T
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, lenient := any(p).(Lenient); !lenient {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("decode %s: %w", p.EventType(), err)
	}
	return p, nil
}
