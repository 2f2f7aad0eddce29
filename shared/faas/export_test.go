package faas

import (
	"encoding/json"
	"errors"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Unexported pieces the black-box tests in package faas_test reach through.
var (
	StreamingHandler   = streamingHandler
	CloudEventFunction = cloudEventFunction
)

// EventFromPubSubEnvelope rebuilds the event a Pub/Sub push envelope carries.
func EventFromPubSubEnvelope(body []byte) (cloudevents.Event, error) {
	var env pubsubEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return cloudevents.Event{}, err
	}
	if env.Message == nil {
		return cloudevents.Event{}, errors.New("no message")
	}
	return eventFromPubSub(env.Message, env.Subscription)
}

// FromEventBridgeJSON decodes an EventBridge event as LambdaHandler does.
func FromEventBridgeJSON(raw []byte) (cloudevents.Event, error) { return fromEventBridgeJSON(raw) }

// ReadHTTPEvent decodes a delivery as the HTTP receiver does.
var ReadHTTPEvent = readHTTPEvent
