package outbox

import (
	"context"
	"errors"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// PublisherFunc adapts a function (e.g. an HTTP sender's Send) to Publisher.
type PublisherFunc func(ctx context.Context, ev cloudevents.Event) error

func (f PublisherFunc) Publish(ctx context.Context, ev cloudevents.Event) error { return f(ctx, ev) }

// LocalBus delivers events in-process to the routers that handle their type,
// the way Knative Triggers route a Broker's events to services. An event is
// delivered when every router that handles it acknowledged it.
type LocalBus struct {
	routers []*faas.Router
}

// NewLocalBus routes to the given function routers.
func NewLocalBus(routers ...*faas.Router) *LocalBus { return &LocalBus{routers: routers} }

// Publish implements Publisher.
func (b *LocalBus) Publish(ctx context.Context, ev cloudevents.Event) error {
	var errs []error
	handled := false
	for _, r := range b.routers {
		if !r.Handles(ev.Type()) {
			continue
		}
		handled = true
		res := r.Deliver(ctx, ev)
		if res.Outcome == faas.Retry {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name(), res.Err))
		}
	}
	if !handled {
		return faas.Permanent(fmt.Errorf("no function handles event type %q", ev.Type()))
	}
	return errors.Join(errs...)
}

// FailureStore records permanent event failures in the event_failures table.
type FailureStore struct{ Pool *pgxpool.Pool }

// RecordFailure implements faas.FailureRecorder; recording the same failure twice is a no-op.
func (s FailureStore) RecordFailure(ctx context.Context, ev cloudevents.Event, handler string, cause error) error {
	data := ev.Data()
	if len(data) == 0 || !jsonValid(data) {
		data = nil
	}
	source := ev.Source()
	_, err := s.Pool.Exec(ctx, `
		INSERT INTO event_failures (event_id, type, source, handler, error, data)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (event_id, source, handler) DO NOTHING`,
		ev.ID(), ev.Type(), source, handler, cause.Error(), data)
	return err
}
