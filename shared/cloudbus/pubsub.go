package cloudbus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub"
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// pubsubMaxBytes is Pub/Sub's message size limit (data and attributes).
const pubsubMaxBytes = 10 << 20

// PubSubConfig configures a Pub/Sub publisher.
type PubSubConfig struct {
	// Topics routes event types to topic ids or full names
	// ("projects/p/topics/t"); "*" is the topic of types not named. Parse it
	// from YUXI_PUBSUB_TOPICS with ParseRoutes (a bare topic means "*=topic").
	Topics Routes
	// Unordered turns ordering keys off (YUXI_PUBSUB_ORDERING=off). By
	// default the events of a thread carry the thread id as their ordering
	// key; subscriptions with message ordering enabled then deliver them in
	// publication order.
	Unordered bool
	// Delay is how long the client waits to fill a publish request (default 2ms).
	Delay time.Duration
}

// PubSub publishes events to Pub/Sub topics in the CloudEvents Pub/Sub
// binding's binary mode. The client batches requests itself; each event's
// result is its own, so a failed message is retried alone.
type PubSub struct {
	client *pubsub.Client
	cfg    PubSubConfig

	mu         sync.Mutex
	publishers map[string]*pubsub.Topic
}

// NewPubSub returns a publisher through client; the caller closes client
// after Stop.
func NewPubSub(client *pubsub.Client, cfg PubSubConfig) *PubSub {
	if cfg.Delay <= 0 {
		cfg.Delay = 2 * time.Millisecond
	}
	return &PubSub{client: client, cfg: cfg, publishers: map[string]*pubsub.Topic{}}
}

// topic resolves a topic id or full name ("projects/p/topics/t").
func (p *PubSub) topic(name string) *pubsub.Topic {
	if rest, ok := strings.CutPrefix(name, "projects/"); ok {
		if project, id, ok := strings.Cut(rest, "/topics/"); ok {
			return p.client.TopicInProject(id, project)
		}
	}
	return p.client.Topic(name)
}

func (p *PubSub) publisher(topic string) *pubsub.Topic {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.publishers[topic]
	if !ok {
		t = p.topic(topic)
		t.PublishSettings.DelayThreshold = p.cfg.Delay
		t.EnableMessageOrdering = !p.cfg.Unordered
		p.publishers[topic] = t
	}
	return t
}

// Publish implements outbox.Publisher.
func (p *PubSub) Publish(ctx context.Context, ev cloudevents.Event) error {
	if err := ev.Validate(); err != nil {
		return faas.Permanent(fmt.Errorf("publish event %q: invalid CloudEvent: %w", ev.ID(), err))
	}
	topics := p.cfg.Topics.For(ev.Type())
	if len(topics) == 0 {
		return faas.Permanent(fmt.Errorf("no Pub/Sub topic is routed event type %q (YUXI_PUBSUB_TOPICS)", ev.Type()))
	}
	msg, err := PubSubMessage(ev)
	if err != nil {
		return faas.Permanent(err)
	}
	if p.cfg.Unordered {
		msg.OrderingKey = ""
	}
	errs := make([]error, len(topics))
	results := make([]*pubsub.PublishResult, len(topics))
	for i, topic := range topics {
		results[i] = p.publisher(topic).Publish(ctx, msg)
	}
	for i, res := range results {
		if _, err := res.Get(ctx); err != nil {
			if msg.OrderingKey != "" {
				// A failed ordered message pauses its key; the retry (this
				// event again, from the relay or the sweep) must be let through.
				p.publisher(topics[i]).ResumePublish(msg.OrderingKey)
			}
			errs[i] = fmt.Errorf("publish %s %s to %s: %w", ev.Type(), ev.ID(), topics[i], err)
		}
	}
	return joinDeliveries(errs)
}

// Stop flushes and stops the topic publishers.
func (p *PubSub) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.publishers {
		t.Stop()
	}
}

// PubSubMessage encodes ev in the CloudEvents Pub/Sub binding's binary mode:
// the data as the message data, the context attributes and extensions as
// ce-* attributes, the data content type as content-type, and the thread id
// as the ordering key.
func PubSubMessage(ev cloudevents.Event) (*pubsub.Message, error) {
	attrs := map[string]string{
		"ce-specversion": ev.SpecVersion(),
		"ce-id":          ev.ID(),
		"ce-source":      ev.Source(),
		"ce-type":        ev.Type(),
	}
	if s := ev.Subject(); s != "" {
		attrs["ce-subject"] = s
	}
	if s := ev.DataSchema(); s != "" {
		attrs["ce-dataschema"] = s
	}
	if t := ev.Time(); !t.IsZero() {
		attrs["ce-time"] = t.UTC().Format(time.RFC3339Nano)
	}
	if ct := ev.DataContentType(); ct != "" {
		attrs["content-type"] = ct
	}
	for k, v := range ev.Extensions() {
		s, err := extString(v)
		if err != nil {
			return nil, fmt.Errorf("event %s extension %s: %w", ev.ID(), k, err)
		}
		attrs["ce-"+k] = s
	}
	size := len(ev.Data())
	for k, v := range attrs {
		if len(k) > 256 || len(v) > 1024 {
			return nil, fmt.Errorf("event %s: attribute %s is longer than Pub/Sub allows", ev.ID(), k)
		}
		size += len(k) + len(v)
	}
	if size > pubsubMaxBytes {
		return nil, fmt.Errorf("event %s: %d bytes, more than a Pub/Sub message's 10 MiB", ev.ID(), size)
	}
	return &pubsub.Message{Data: ev.Data(), Attributes: attrs, OrderingKey: orderingKey(ev)}, nil
}

func extString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case fmt.Stringer:
		return x.String(), nil
	case bool, int32, int64, int:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("unsupported extension value %T", v)
}
