package bootstrap_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
)

// YUXI_RELAY names a transport and each transport its destinations; a
// misconfiguration fails at start, naming the variable.
func TestRelayConfiguration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env     map[string]string
		wantErr string // "" for valid
	}{
		{map[string]string{}, ""},
		{map[string]string{"YUXI_RELAY": "http", "K_SINK": "http://broker"}, ""},
		{map[string]string{"YUXI_RELAY": "eventbridge"}, "YUXI_EVENTBRIDGE_BUS"},
		{map[string]string{"YUXI_RELAY": "eventbridge", "YUXI_EVENTBRIDGE_BUS": "yuxi"}, ""},
		{map[string]string{"YUXI_RELAY": "sqs"}, "YUXI_SQS_QUEUES"},
		{map[string]string{"YUXI_RELAY": "sqs", "YUXI_SQS_QUEUES": "io.yuxi.agent.step.ready.v1"}, "YUXI_SQS_QUEUES"},
		{map[string]string{"YUXI_RELAY": "sqs", "YUXI_SQS_QUEUES": "*=https://sqs.eu-west-1.amazonaws.com/1/q"}, ""},
		{map[string]string{"YUXI_RELAY": "pubsub", "YUXI_PUBSUB_TOPICS": "yuxi-events"}, "YUXI_PUBSUB_PROJECT"},
		{map[string]string{"YUXI_RELAY": "pubsub", "YUXI_PUBSUB_TOPICS": "yuxi-events", "GOOGLE_CLOUD_PROJECT": "p"}, ""},
		{map[string]string{"YUXI_RELAY": "pubsub", "GOOGLE_CLOUD_PROJECT": "p"}, "YUXI_PUBSUB_TOPICS"},
		{map[string]string{"YUXI_RELAY": "kafka"}, "YUXI_RELAY"},
	}
	for _, c := range cases {
		cfg, err := bootstrap.Load(env(c.env), nil, "8080")
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: error %v, want one naming %s", c.env, err, c.wantErr)
		case err == nil && c.env["YUXI_PUBSUB_TOPICS"] != "" && !cfg.PubSubOrdering:
			t.Errorf("%v: ordering is on by default", c.env)
		}
	}
}
