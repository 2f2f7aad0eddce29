package cloudbus_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"cloud.google.com/go/pubsub"
	"cloud.google.com/go/pubsub/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/cloudbus"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

const project = "yuxi-test"

func newPubSubFake(t *testing.T) (*pstest.Server, *pubsub.Client) {
	t.Helper()
	srv := pstest.NewServer()
	t.Cleanup(func() { _ = srv.Close() })
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	client, err := pubsub.NewClient(context.Background(), project, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return srv, client
}

func createTopic(t *testing.T, client *pubsub.Client, id string) {
	t.Helper()
	if _, err := client.CreateTopic(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

// Events leave in binary mode with the thread as ordering key, to the topic
// routed to their type; a consumer behind a Pub/Sub push subscription (or an
// Eventarc trigger) decodes them back into the same event. A topic that does
// not exist yet fails the publication, which the sweep repeats once it does.
func TestPubSubRelayPublishesOrderedBinaryMessages(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	srv, client := newPubSubFake(t)
	createTopic(t, client, "yuxi-agent-step")
	routes, _ := cloudbus.ParseRoutes(events.TypeStepReady + "=yuxi-agent-step,*=projects/" + project + "/topics/yuxi-dispatcher")
	pub := cloudbus.NewPubSub(client, cloudbus.PubSubConfig{Topics: routes})
	t.Cleanup(pub.Stop)
	ob := startRelay(t, pool, pub)
	emit(t, pool, ob, steps(5, "run_ps")...)
	emit(t, pool, ob, events.SweepRequested{Reason: "later"}) // its topic does not exist yet
	waitPublished(t, pool, 5)
	ob.Relay.Wait()
	if _, done := counts(t, pool); done != 5 {
		t.Fatalf("published %d rows, want 5 (the sweep request's topic is missing)", done)
	}
	createTopic(t, client, "yuxi-dispatcher")
	expireClaims(t, pool)
	if n, err := ob.Relay.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	waitPublished(t, pool, 6)

	sink := newStepSink()
	push := httptest.NewServer(faas.NewHTTPReceiver(sink.r))
	defer push.Close()
	var order []string
	for _, m := range srv.Messages() {
		if m.Topic == "projects/"+project+"/topics/yuxi-dispatcher" {
			if m.Attributes["ce-type"] != events.TypeSweepRequested || m.OrderingKey != "" {
				t.Errorf("sweep message: %v key %q", m.Attributes, m.OrderingKey)
			}
			continue
		}
		if m.OrderingKey != "thread_run_ps" {
			t.Errorf("ordering key %q, want the thread", m.OrderingKey)
		}
		for _, a := range []string{"ce-id", "ce-source", "ce-type", "ce-specversion", "ce-runid", "ce-threadid", "ce-traceparent", "content-type"} {
			if m.Attributes[a] == "" {
				t.Errorf("message lacks attribute %s: %v", a, m.Attributes)
			}
		}
		var in events.StepReady
		if err := json.Unmarshal(m.Data, &in); err != nil {
			t.Fatal(err)
		}
		order = append(order, in.RunID)
		body, _ := json.Marshal(map[string]any{
			"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(m.Data), "attributes": m.Attributes, "messageId": m.ID, "publishTime": m.PublishTime},
			"subscription": "projects/" + project + "/subscriptions/agent-step",
		})
		resp, err := http.Post(push.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 204 {
			t.Fatalf("push delivery answered %d", resp.StatusCode)
		}
	}
	if len(order) != 5 || len(sink.runs) != 5 {
		t.Fatalf("messages %v, consumer got %v", order, sink.runs)
	}
}

func isPermanent(err error) bool { return faas.IsPermanent(err) }
