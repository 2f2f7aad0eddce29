package faas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// PubSubMessagePublished is the type of the CloudEvent an Eventarc Pub/Sub
// trigger delivers. Its data is the Pub/Sub push envelope:
//
//	{"message":{"data":"<base64>","attributes":{…},"messageId":…,"publishTime":…},
//	 "subscription":"projects/…/subscriptions/…"}
//
// A Pub/Sub push subscription POSTs the same envelope without CloudEvents
// headers.
const PubSubMessagePublished = "google.cloud.pubsub.topic.v1.messagePublished"

// pubsubEnvelope is a Pub/Sub push body and the data of a messagePublished
// event.
type pubsubEnvelope struct {
	Message      *pubsubMessage `json:"message"`
	Subscription string         `json:"subscription"`
}

type pubsubMessage struct {
	Data        []byte            `json:"data"` // base64 in JSON
	Attributes  map[string]string `json:"attributes"`
	MessageID   string            `json:"messageId"`
	MessageID2  string            `json:"message_id"` // push sends both spellings
	PublishTime string            `json:"publishTime"`
}

func (m *pubsubMessage) id() string {
	if m.MessageID != "" {
		return m.MessageID
	}
	return m.MessageID2
}

// pushEnvelopeEvent recognises a Pub/Sub push body (a JSON object with a
// "message" object) and wraps it in the messagePublished event Eventarc would
// have delivered, so both shapes take one path. ok=false: not a push body.
func pushEnvelopeEvent(body []byte) (ev cloudevents.Event, ok bool) {
	var probe struct {
		Message      json.RawMessage `json:"message"`
		Subscription string          `json:"subscription"`
	}
	if json.Unmarshal(body, &probe) != nil || !bytes.HasPrefix(bytes.TrimSpace(probe.Message), []byte("{")) {
		return ev, false
	}
	var id struct {
		MessageID  string `json:"messageId"`
		MessageID2 string `json:"message_id"`
	}
	_ = json.Unmarshal(probe.Message, &id)
	ev = cloudevents.NewEvent()
	ev.SetType(PubSubMessagePublished)
	ev.SetSource("//pubsub.googleapis.com/" + probe.Subscription)
	ev.SetID(id.MessageID)
	if ev.ID() == "" {
		ev.SetID(id.MessageID2)
	}
	_ = ev.SetData(cloudevents.ApplicationJSON, body)
	return ev, true
}

// deliverMessagePublished unwraps the Yuxi event a Pub/Sub message carries and
// delivers it. An envelope that carries no valid event is recorded against
// the messagePublished event itself, so nothing is dropped unrecorded.
func (r *Router) deliverMessagePublished(ctx context.Context, outer cloudevents.Event) Result {
	var env pubsubEnvelope
	if err := json.Unmarshal(outer.Data(), &env); err != nil || env.Message == nil {
		if err == nil {
			err = errors.New(`no "message" object`)
		}
		return r.finish(ctx, outer, "", Result{Malformed, fmt.Errorf("pub/sub envelope: %w", err)})
	}
	inner, err := eventFromPubSub(env.Message, env.Subscription)
	if err == nil {
		if verr := inner.Validate(); verr != nil {
			err = fmt.Errorf("invalid CloudEvent: %w", verr)
		} else if inner.Type() == PubSubMessagePublished {
			err = errors.New("a messagePublished event inside a Pub/Sub message is not unwrapped twice")
		}
	}
	if err != nil {
		return r.finish(ctx, outer, "", Result{Malformed, fmt.Errorf("pub/sub message %s: %w", env.Message.id(), err)})
	}
	return r.Deliver(ctx, inner)
}

// coreAttributes are the CloudEvents context attributes that are not
// extensions.
var coreAttributes = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true, "subject": true,
	"time": true, "datacontenttype": true, "dataschema": true, "data": true, "data_base64": true,
}

// eventFromPubSub rebuilds the CloudEvent a Pub/Sub message carries, following
// the CloudEvents Pub/Sub binding: binary mode when the message has ce-
// attributes (the data is the event's data, content-type its
// datacontenttype), structured mode otherwise (the data is a JSON CloudEvent).
// Other message attributes become extensions when their names are valid
// extension names and do not clash with an attribute the event already has.
//
// In binary mode a message that names only ce-type (a Cloud Scheduler job's
// Pub/Sub target has fixed attributes, so it cannot set a fresh ce-id per
// tick) takes its id from the message id, which stays the same when Pub/Sub
// redelivers, its source from the subscription and its time from the publish
// time.
func eventFromPubSub(m *pubsubMessage, subscription string) (cloudevents.Event, error) {
	attrs := m.Attributes
	var ev cloudevents.Event
	_, binary := attrs["ce-specversion"]
	if _, ok := attrs["ce-type"]; ok {
		binary = true
	}
	if binary {
		ev = cloudevents.NewEvent(cloudevents.VersionV1)
		if v := attrs["ce-specversion"]; v != "" && v != cloudevents.VersionV1 {
			return ev, fmt.Errorf("unsupported ce-specversion %q", v)
		}
		ct := attrs["content-type"]
		for k, v := range attrs {
			name, ok := strings.CutPrefix(k, "ce-")
			if !ok {
				continue
			}
			switch name {
			case "specversion":
			case "id":
				ev.SetID(v)
			case "source":
				ev.SetSource(v)
			case "type":
				ev.SetType(v)
			case "subject":
				ev.SetSubject(v)
			case "dataschema":
				ev.SetDataSchema(v)
			case "datacontenttype":
				if ct == "" {
					ct = v
				}
			case "time":
				t, err := time.Parse(time.RFC3339Nano, v)
				if err != nil {
					return ev, fmt.Errorf("ce-time: %w", err)
				}
				ev.SetTime(t)
			default:
				_ = ev.Context.SetExtension(name, v) // names CloudEvents cannot carry are left out
			}
		}
		if ev.ID() == "" {
			ev.SetID(m.id())
		}
		if ev.Source() == "" && subscription != "" {
			ev.SetSource("//pubsub.googleapis.com/" + subscription)
		}
		if ev.Time().IsZero() && m.PublishTime != "" {
			if t, err := time.Parse(time.RFC3339Nano, m.PublishTime); err == nil {
				ev.SetTime(t)
			}
		}
		if ct == "" && json.Valid(m.Data) {
			ct = cloudevents.ApplicationJSON
		}
		if len(m.Data) > 0 {
			if err := ev.SetData(ct, m.Data); err != nil {
				return ev, fmt.Errorf("data: %w", err)
			}
		} else if ct != "" {
			ev.SetDataContentType(ct)
		}
	} else {
		if len(bytes.TrimSpace(m.Data)) == 0 {
			return ev, errors.New("no data and no ce- attributes: not a CloudEvent")
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(m.Data, &probe); err != nil {
			return ev, fmt.Errorf("data is neither a structured CloudEvent nor described by ce- attributes: %w", err)
		}
		if _, ok := probe["specversion"]; !ok {
			return ev, errors.New("data is neither a structured CloudEvent (no specversion) nor described by ce- attributes")
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return ev, fmt.Errorf("structured CloudEvent in data: %w", err)
		}
	}
	have := ev.Extensions()
	for k, v := range attrs {
		if strings.HasPrefix(k, "ce-") || k == "content-type" || coreAttributes[k] {
			continue
		}
		if _, ok := have[strings.ToLower(k)]; ok {
			continue
		}
		_ = ev.Context.SetExtension(k, v) // names CloudEvents cannot carry are left out
	}
	return ev, nil
}
