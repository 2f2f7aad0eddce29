package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/pubsub"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/shared/cloudbus"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// Relay transports (YUXI_RELAY).
const (
	RelayHTTP        = "http"
	RelayEventBridge = "eventbridge"
	RelaySQS         = "sqs"
	RelayPubSub      = "pubsub"
)

// relay is the transport in effect: YUXI_RELAY, else http.
func (c Config) relay() string {
	if c.Relay == "" {
		return RelayHTTP
	}
	return c.Relay
}

func (c Config) validateRelay() error {
	switch c.relay() {
	case RelayHTTP:
	case RelayEventBridge:
		if c.EventBridgeBus == "" {
			return errors.New("YUXI_RELAY=eventbridge needs YUXI_EVENTBRIDGE_BUS (the bus name or ARN)")
		}
	case RelaySQS:
		if _, err := cloudbus.ParseRoutes(c.SQSQueues); err != nil {
			return fmt.Errorf("YUXI_SQS_QUEUES: %w", err)
		}
	case RelayPubSub:
		if _, err := c.pubsubTopics(); err != nil {
			return fmt.Errorf("YUXI_PUBSUB_TOPICS: %w", err)
		}
		if c.PubSubProject == "" {
			return errors.New("YUXI_RELAY=pubsub needs YUXI_PUBSUB_PROJECT (or GOOGLE_CLOUD_PROJECT)")
		}
	default:
		return fmt.Errorf("YUXI_RELAY=%q: want http, eventbridge, sqs or pubsub", c.Relay)
	}
	return nil
}

// pubsubTopics reads YUXI_PUBSUB_TOPICS: a bare topic is every type's.
func (c Config) pubsubTopics() (cloudbus.Routes, error) {
	s := strings.TrimSpace(c.PubSubTopics)
	if s != "" && !strings.Contains(s, "=") {
		s = "*=" + s
	}
	return cloudbus.ParseRoutes(s)
}

// cloudPublisher builds the outbox publisher YUXI_RELAY names. Clients it
// opens are closed with the core.
func (c *Core) cloudPublisher(ctx context.Context) (outbox.Publisher, error) {
	cfg := c.Config
	switch cfg.relay() {
	case RelayEventBridge:
		awsCfg, err := c.awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		return cloudbus.NewEventBridge(eventbridge.NewFromConfig(awsCfg), cloudbus.EventBridgeConfig{
			Bus: cfg.EventBridgeBus, Source: cfg.EventBridgeSource}), nil
	case RelaySQS:
		awsCfg, err := c.awsConfig(ctx)
		if err != nil {
			return nil, err
		}
		routes, _ := cloudbus.ParseRoutes(cfg.SQSQueues) // validated
		return cloudbus.NewSQS(sqs.NewFromConfig(awsCfg), cloudbus.SQSConfig{Queues: routes}), nil
	case RelayPubSub:
		topics, _ := cfg.pubsubTopics() // validated
		// Application Default Credentials (the service account on Cloud
		// Run); PUBSUB_EMULATOR_HOST points the client at an emulator.
		client, err := pubsub.NewClient(ctx, cfg.PubSubProject)
		if err != nil {
			return nil, fmt.Errorf("pub/sub client: %w", err)
		}
		pub := cloudbus.NewPubSub(client, cloudbus.PubSubConfig{Topics: topics, Unordered: !cfg.PubSubOrdering})
		c.OnClose(func() { pub.Stop(); _ = client.Close() })
		return pub, nil
	}
	if cfg.Sink == "" {
		return outbox.PublisherFunc(func(ctx context.Context, ev cloudevents.Event) error {
			return errors.New("no event sink: set K_SINK (the broker URL) or YUXI_RELAY for a standalone function")
		}), nil
	}
	return outbox.PublisherFunc(faas.NewHTTPSender(cfg.Sink, &http.Client{Timeout: 30 * time.Second}).Send), nil
}

// awsConfig loads the AWS SDK's configuration: its default credential chain
// (on Lambda, the function role's credentials in the environment the runtime
// sets), AWS_REGION, and YUXI_AWS_ENDPOINT when set.
func (c *Core) awsConfig(ctx context.Context) (aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{}
	if c.Config.AWSRegion != "" {
		opts = append(opts, awsconfig.WithRegion(c.Config.AWSRegion))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws config: %w", err)
	}
	if c.Config.AWSEndpoint != "" {
		awsCfg.BaseEndpoint = aws.String(c.Config.AWSEndpoint)
	}
	return awsCfg, nil
}
