// Package cloudbus publishes outbox events to the cloud event routers:
// Amazon EventBridge (PutEvents), Amazon SQS (SendMessageBatch) and Google
// Cloud Pub/Sub. Each publisher implements outbox.Publisher, so the outbox
// relay's contract is unchanged: an event is acknowledged (its row marked
// published) only when the service accepted it, a per-entry failure is a
// retryable error for that event alone (the relay retries it, then the sweep
// does), and a permanent error (an entry the service refuses as malformed)
// is logged and acknowledged.
//
// Concurrent Publish calls are gathered into batches (EventBridge and SQS
// take at most 10 entries per request): the relay publishes the rows of a
// commit concurrently, so one commit's events usually leave in one request.
//
// Wire shapes match what shared/faas decodes on the way in:
//
//   - EventBridge: source "yuxi.outbox" (configurable), detail-type = the
//     event type, detail = the structured CloudEvent (JSON).
//   - SQS: the body is the structured CloudEvent; on FIFO queues the message
//     group is the event's thread (else its type) and the deduplication id
//     its id.
//   - Pub/Sub: the CloudEvents Pub/Sub binding in binary mode (data = event
//     data, ce-* attributes, content-type), ordering key = the thread id for
//     the events of a thread.
//
// Imported by: shared/bootstrap (which chooses the relay from configuration)
// and tests.
// May import: events, shared/faas, the CloudEvents SDK, the AWS SDK
// (EventBridge, SQS), the Google Cloud Pub/Sub client and the standard
// library.
package cloudbus
