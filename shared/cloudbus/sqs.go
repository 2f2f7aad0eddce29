package cloudbus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// SendMessageBatch limits.
const (
	sqsMaxEntries = 10
	sqsMaxBytes   = 256 * 1024
)

// SQSAPI is the part of the SQS client the publisher uses.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQSConfig configures an SQS publisher.
type SQSConfig struct {
	// Queues routes event types to queue URLs: every queue listed for the
	// event's type receives it ("*" lists the queues for types not named).
	// Parse it from YUXI_SQS_QUEUES with ParseRoutes.
	Queues  Routes
	Linger  time.Duration // default 2ms
	Timeout time.Duration // per request (default 15s)
}

// SQS sends events straight to consumer queues with SendMessageBatch: the
// transport for deployments without an EventBridge bus in front of the
// queues. An event is published when every queue routed to accepted it.
type SQS struct {
	api SQSAPI
	cfg SQSConfig

	mu       sync.Mutex
	batchers map[string]*batcher
}

// NewSQS returns a publisher sending through api.
func NewSQS(api SQSAPI, cfg SQSConfig) *SQS {
	if cfg.Linger <= 0 {
		cfg.Linger = 2 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	return &SQS{api: api, cfg: cfg, batchers: map[string]*batcher{}}
}

// Publish implements outbox.Publisher.
func (p *SQS) Publish(ctx context.Context, ev cloudevents.Event) error {
	if err := ev.Validate(); err != nil {
		return faas.Permanent(fmt.Errorf("send event %q: invalid CloudEvent: %w", ev.ID(), err))
	}
	queues := p.cfg.Queues.For(ev.Type())
	if len(queues) == 0 {
		return faas.Permanent(fmt.Errorf("no SQS queue is routed event type %q (YUXI_SQS_QUEUES)", ev.Type()))
	}
	if len(queues) == 1 {
		return p.batcher(queues[0]).publish(ctx, ev)
	}
	errs := make([]error, len(queues))
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Go(func() { errs[i] = p.batcher(q).publish(ctx, ev) })
	}
	wg.Wait()
	return joinDeliveries(errs)
}

// joinDeliveries: the event is delivered when every destination took it; it
// is permanently failed only when every failure is permanent.
func joinDeliveries(errs []error) error {
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	for _, e := range errs {
		if e != nil && !faas.IsPermanent(e) {
			return err
		}
	}
	return faas.Permanent(err)
}

func (p *SQS) batcher(queue string) *batcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.batchers[queue]
	if !ok {
		b = newBatcher(sqsMaxEntries, p.cfg.Linger, p.cfg.Timeout, func(ctx context.Context, evs []cloudevents.Event) []error {
			return p.send(ctx, queue, evs)
		})
		p.batchers[queue] = b
	}
	return b
}

func (p *SQS) send(ctx context.Context, queue string, evs []cloudevents.Event) []error {
	fifo := strings.HasSuffix(queue, ".fifo")
	errs := make([]error, len(evs))
	var (
		entries []sqstypes.SendMessageBatchRequestEntry
		index   []int
		size    int
	)
	flush := func() {
		if len(entries) == 0 {
			return
		}
		p.sendBatch(ctx, queue, entries, index, evs, errs)
		entries, index, size = nil, nil, 0
	}
	for i, ev := range evs {
		body, err := json.Marshal(ev)
		if err != nil {
			errs[i] = faas.Permanent(fmt.Errorf("encode %s %s: %w", ev.Type(), ev.ID(), err))
			continue
		}
		if len(body) > sqsMaxBytes {
			errs[i] = faas.Permanent(fmt.Errorf("send %s %s: %d bytes, more than an SQS message's 256 KiB", ev.Type(), ev.ID(), len(body)))
			continue
		}
		if size+len(body) > sqsMaxBytes {
			flush()
		}
		e := sqstypes.SendMessageBatchRequestEntry{
			Id:          aws.String("e" + strconv.Itoa(i)),
			MessageBody: aws.String(string(body)),
		}
		if fifo {
			e.MessageGroupId = aws.String(orderingKey(ev))
			if *e.MessageGroupId == "" {
				e.MessageGroupId = aws.String(ev.Type())
			}
			sum := sha256.Sum256([]byte(ev.Source() + "\x00" + ev.ID()))
			e.MessageDeduplicationId = aws.String(hex.EncodeToString(sum[:]))
		}
		entries = append(entries, e)
		index = append(index, i)
		size += len(body)
	}
	flush()
	return errs
}

func (p *SQS) sendBatch(ctx context.Context, queue string, entries []sqstypes.SendMessageBatchRequestEntry, index []int, evs []cloudevents.Event, errs []error) {
	out, err := p.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: entries})
	if err != nil {
		for _, i := range index {
			errs[i] = fmt.Errorf("send %s %s to %s: %w", evs[i].Type(), evs[i].ID(), queue, err)
		}
		return
	}
	byID := make(map[string]int, len(index))
	for j, i := range index {
		byID[*entries[j].Id] = i
	}
	ok := make(map[int]bool, len(index))
	for _, s := range out.Successful {
		if i, found := byID[aws.ToString(s.Id)]; found {
			ok[i] = true
		}
	}
	failed := make(map[int]bool, len(out.Failed))
	for _, f := range out.Failed {
		i, found := byID[aws.ToString(f.Id)]
		if !found {
			continue
		}
		failed[i] = true
		e := fmt.Errorf("send %s %s to %s: %s: %s", evs[i].Type(), evs[i].ID(), queue, aws.ToString(f.Code), aws.ToString(f.Message))
		if f.SenderFault {
			e = faas.Permanent(e)
		}
		errs[i] = e
	}
	for _, i := range index {
		if !ok[i] && !failed[i] {
			errs[i] = fmt.Errorf("send %s %s to %s: SendMessageBatch did not report the entry", evs[i].Type(), evs[i].ID(), queue)
		}
	}
}

// orderingKey is what orders an event among others: its thread, when it has
// one (a thread's steps, tool calls and run ends are handled in order by
// the per-thread queue anyway; keeping them in order on the wire spares
// redeliveries). Other events are unordered.
func orderingKey(ev cloudevents.Event) string {
	s, _ := ev.Extensions()[events.ExtThreadID].(string)
	return s
}
