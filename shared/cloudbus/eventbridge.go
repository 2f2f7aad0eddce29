package cloudbus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// DefaultEventBridgeSource is the source of the events the relay puts on the
// bus; the bus's rules match it (terraform/aws, localstack/).
const DefaultEventBridgeSource = "yuxi.outbox"

// PutEvents limits: entries per request and bytes per request.
const (
	putEventsMaxEntries = 10
	putEventsMaxBytes   = 256 * 1024
)

// EventBridgeAPI is the part of the EventBridge client the publisher uses.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// EventBridgeConfig configures an EventBridge publisher.
type EventBridgeConfig struct {
	Bus     string        // event bus name or ARN (YUXI_EVENTBRIDGE_BUS)
	Source  string        // default DefaultEventBridgeSource (YUXI_EVENTBRIDGE_SOURCE)
	Linger  time.Duration // how long a batch waits for more events (default 2ms)
	Timeout time.Duration // per request (default 15s)
}

// EventBridge publishes events with PutEvents, up to 10 per request. An
// entry EventBridge fails is retried alone (the relay sees an error for that
// event only); entries it refuses as malformed are permanent failures.
type EventBridge struct {
	api EventBridgeAPI
	cfg EventBridgeConfig
	b   *batcher
}

// NewEventBridge returns a publisher putting events on cfg.Bus through api.
func NewEventBridge(api EventBridgeAPI, cfg EventBridgeConfig) *EventBridge {
	if cfg.Source == "" {
		cfg.Source = DefaultEventBridgeSource
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 2 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	p := &EventBridge{api: api, cfg: cfg}
	p.b = newBatcher(putEventsMaxEntries, cfg.Linger, cfg.Timeout, p.send)
	return p
}

// Publish implements outbox.Publisher.
func (p *EventBridge) Publish(ctx context.Context, ev cloudevents.Event) error {
	if err := ev.Validate(); err != nil {
		return faas.Permanent(fmt.Errorf("put event %q: invalid CloudEvent: %w", ev.ID(), err))
	}
	return p.b.publish(ctx, ev)
}

func (p *EventBridge) send(ctx context.Context, evs []cloudevents.Event) []error {
	errs := make([]error, len(evs))
	var (
		entries []ebtypes.PutEventsRequestEntry
		index   []int // entries[i] is evs[index[i]]
		size    int
	)
	flush := func() {
		if len(entries) == 0 {
			return
		}
		p.put(ctx, entries, index, evs, errs)
		entries, index, size = nil, nil, 0
	}
	for i, ev := range evs {
		detail, err := json.Marshal(ev)
		if err != nil {
			errs[i] = faas.Permanent(fmt.Errorf("encode %s %s: %w", ev.Type(), ev.ID(), err))
			continue
		}
		// EventBridge's entry size: source, detail-type, detail, and 14 bytes for the time.
		n := len(p.cfg.Source) + len(ev.Type()) + len(detail) + 14
		if n > putEventsMaxBytes {
			errs[i] = faas.Permanent(fmt.Errorf("put event %s %s: %d bytes, more than EventBridge's 256 KiB", ev.Type(), ev.ID(), n))
			continue
		}
		if size+n > putEventsMaxBytes {
			flush()
		}
		t := ev.Time()
		if t.IsZero() {
			t = time.Now()
		}
		entries = append(entries, ebtypes.PutEventsRequestEntry{
			EventBusName: aws.String(p.cfg.Bus),
			Source:       aws.String(p.cfg.Source),
			DetailType:   aws.String(ev.Type()),
			Detail:       aws.String(string(detail)),
			Time:         aws.Time(t),
		})
		index = append(index, i)
		size += n
	}
	flush()
	return errs
}

// put sends one request and writes each entry's result into errs.
func (p *EventBridge) put(ctx context.Context, entries []ebtypes.PutEventsRequestEntry, index []int, evs []cloudevents.Event, errs []error) {
	out, err := p.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	if err == nil && len(out.Entries) != len(entries) {
		err = fmt.Errorf("PutEvents answered %d entries for %d", len(out.Entries), len(entries))
	}
	for j, i := range index {
		ev := evs[i]
		switch {
		case err != nil:
			// A request-level failure (network, throttling, credentials, a
			// missing bus) is never the event's fault: retry.
			errs[i] = fmt.Errorf("put %s %s on %s: %w", ev.Type(), ev.ID(), p.cfg.Bus, err)
		case aws.ToString(out.Entries[j].ErrorCode) != "":
			code := aws.ToString(out.Entries[j].ErrorCode)
			e := fmt.Errorf("put %s %s on %s: %s: %s", ev.Type(), ev.ID(), p.cfg.Bus, code, aws.ToString(out.Entries[j].ErrorMessage))
			if entryRefused(code) {
				e = faas.Permanent(e)
			}
			errs[i] = e
		}
	}
}

// entryRefused: PutEvents entry error codes that say the entry itself is
// wrong, so sending it again cannot help.
func entryRefused(code string) bool {
	switch code {
	case "MalformedDetail", "InvalidArgument", "ValidationException", "InvalidEventPatternException":
		return true
	}
	return false
}
