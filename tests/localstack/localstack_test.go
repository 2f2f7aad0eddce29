// Package localstack checks localstack/ without LocalStack (it needs Docker,
// which the machines running make test do not have): the init hook's syntax,
// then the hook itself run against a stub awslocal that records every call,
// each checked against the AWS CLI commands and options it uses, the JSON it
// passes, and the names it references (created earlier in the hook); the
// routing of event types to functions must be the Knative Triggers'.
package localstack

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/infra/devbroker"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		t.Fatal("no go.mod above the test")
	}
}

// commands: the AWS CLI v2 commands the hook may call and their options
// (from the CLI reference); options whose value is JSON are marked.
var commands = map[string]map[string]bool{ // "service command" → option → JSON value
	"iam create-role":                             {"--role-name": false, "--assume-role-policy-document": true},
	"events create-event-bus":                     {"--name": false},
	"s3api create-bucket":                         {"--bucket": false},
	"lambda create-function":                      {"--function-name": false, "--runtime": false, "--architectures": false, "--handler": false, "--zip-file": false, "--role": false, "--timeout": false, "--memory-size": false, "--environment": true},
	"lambda wait":                                 {"--function-name": false},
	"lambda create-function-url-config":           {"--function-name": false, "--auth-type": false, "--invoke-mode": false},
	"lambda get-function-url-config":              {"--function-name": false, "--query": false, "--output": false},
	"sqs create-queue":                            {"--queue-name": false, "--attributes": true},
	"events put-rule":                             {"--name": false, "--event-bus-name": false, "--event-pattern": true},
	"events put-targets":                          {"--rule": false, "--event-bus-name": false, "--targets": false},
	"lambda create-event-source-mapping":          {"--function-name": false, "--event-source-arn": false, "--batch-size": false, "--function-response-types": false},
	"s3api put-bucket-notification-configuration": {"--bucket": false, "--notification-configuration": true},
	"scheduler create-schedule":                   {"--name": false, "--schedule-expression": false, "--flexible-time-window": true, "--target": true},
}

type call struct {
	cmd  string
	sub  string // the waiter of lambda wait
	opts map[string]string
}

func runHook(t *testing.T) []call {
	t.Helper()
	root := repoRoot(t)
	hook := filepath.Join(root, "localstack", "init", "ready.d", "10-yuxi.sh")
	if out, err := exec.Command("bash", "-n", hook).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	stub := t.TempDir()
	log := filepath.Join(stub, "calls")
	// One call per line: its arguments separated by \x1f.
	script := "#!/bin/bash\n(IFS=$'\\x1f'; echo \"$*\") >> " + log + "\n" +
		"[ \"$1 $2\" = 'lambda get-function-url-config' ] && echo http://stub.lambda-url\nexit 0\n"
	if err := os.WriteFile(filepath.Join(stub, "awslocal"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", hook)
	cmd.Env = append(os.Environ(), "PATH="+stub+":"+os.Getenv("PATH"),
		"YUXI_DATABASE_URL=postgres://db/yuxi", "YUXI_REDIS_URL=redis://redis:6379/0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hook: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var calls []call
	for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		args := strings.Split(line, "\x1f")
		if len(args) < 2 {
			t.Fatalf("call %q", line)
		}
		c := call{cmd: args[0] + " " + args[1], opts: map[string]string{}}
		rest := args[2:]
		if c.cmd == "lambda wait" {
			c.sub, rest = rest[0], rest[1:]
		}
		for i := 0; i < len(rest); i++ {
			if !strings.HasPrefix(rest[i], "--") || i+1 >= len(rest) {
				t.Errorf("%s: argument %q is not an option with a value", c.cmd, rest[i])
				continue
			}
			c.opts[rest[i]] = rest[i+1]
			i++
		}
		calls = append(calls, c)
	}
	return calls
}

func TestLocalStackHookCallsAreWellFormed(t *testing.T) {
	calls := runHook(t)
	created := map[string]bool{} // "kind:name"
	need := func(c call, kind, name string) {
		t.Helper()
		if !created[kind+":"+name] {
			t.Errorf("%s references %s %q, which the hook has not created before", c.cmd, kind, name)
		}
	}
	arnName := func(arn string) string { return arn[strings.LastIndex(arn, ":")+1:] }
	routes := map[string][]string{} // function → event types of its rule
	for _, c := range calls {
		opts, ok := commands[c.cmd]
		if !ok {
			t.Errorf("unknown command aws %s", c.cmd)
			continue
		}
		for o, v := range c.opts {
			isJSON, known := opts[o]
			if !known {
				t.Errorf("aws %s: unknown option %s", c.cmd, o)
			}
			if isJSON && !json.Valid([]byte(v)) {
				t.Errorf("aws %s %s: not JSON: %s", c.cmd, o, v)
			}
		}
		switch c.cmd {
		case "iam create-role":
			created["role:arn:aws:iam::000000000000:role/"+c.opts["--role-name"]] = true
		case "events create-event-bus":
			created["bus:"+c.opts["--name"]] = true
		case "s3api create-bucket":
			created["bucket:"+c.opts["--bucket"]] = true
		case "lambda create-function":
			need(c, "role", c.opts["--role"])
			if c.opts["--runtime"] != "provided.al2023" || c.opts["--handler"] != "bootstrap" || c.opts["--architectures"] != "arm64" {
				t.Errorf("function %s: runtime %q handler %q arch %q", c.opts["--function-name"], c.opts["--runtime"], c.opts["--handler"], c.opts["--architectures"])
			}
			fn := strings.TrimPrefix(c.opts["--function-name"], "yuxi-")
			if c.opts["--zip-file"] != "fileb:///opt/yuxi/lambda/"+fn+".zip" {
				t.Errorf("function %s: zip %s, want make build-lambda's %s.zip", fn, c.opts["--zip-file"], fn)
			}
			var env struct{ Variables map[string]string }
			_ = json.Unmarshal([]byte(c.opts["--environment"]), &env)
			if env.Variables["YUXI_RELAY"] != "eventbridge" || !created["bus:"+env.Variables["YUXI_EVENTBRIDGE_BUS"]] || env.Variables["DATABASE_URL"] == "" {
				t.Errorf("function %s environment: %v", fn, env.Variables)
			}
			created["function:"+c.opts["--function-name"]] = true
		case "lambda wait", "lambda get-function-url-config":
			need(c, "function", c.opts["--function-name"])
		case "lambda create-function-url-config":
			need(c, "function", c.opts["--function-name"])
			if c.opts["--invoke-mode"] != "RESPONSE_STREAM" {
				t.Errorf("intake's Function URL must stream (RESPONSE_STREAM), got %q", c.opts["--invoke-mode"])
			}
		case "sqs create-queue":
			if a := c.opts["--attributes"]; a != "" {
				var attrs map[string]string
				_ = json.Unmarshal([]byte(a), &attrs)
				var redrive struct{ DeadLetterTargetArn string }
				if err := json.Unmarshal([]byte(attrs["RedrivePolicy"]), &redrive); err != nil {
					t.Errorf("queue %s RedrivePolicy: %v", c.opts["--queue-name"], err)
				}
				need(c, "queue", arnName(redrive.DeadLetterTargetArn))
			}
			created["queue:"+c.opts["--queue-name"]] = true
		case "events put-rule":
			need(c, "bus", c.opts["--event-bus-name"])
			var pattern struct {
				Source     []string `json:"source"`
				DetailType []string `json:"detail-type"`
			}
			if err := json.Unmarshal([]byte(c.opts["--event-pattern"]), &pattern); err != nil || !slices.Equal(pattern.Source, []string{"yuxi.outbox"}) {
				t.Errorf("rule %s pattern %s (%v): want source yuxi.outbox, the relay's", c.opts["--name"], c.opts["--event-pattern"], err)
			}
			routes[strings.TrimPrefix(c.opts["--name"], "yuxi-")] = pattern.DetailType
			created["rule:"+c.opts["--name"]] = true
		case "events put-targets":
			need(c, "rule", c.opts["--rule"])
			need(c, "bus", c.opts["--event-bus-name"])
			arn, _ := strings.CutPrefix(strings.Split(c.opts["--targets"], ",")[1], "Arn=")
			need(c, "queue", arnName(arn))
		case "lambda create-event-source-mapping":
			need(c, "function", c.opts["--function-name"])
			need(c, "queue", arnName(c.opts["--event-source-arn"]))
			if c.opts["--function-response-types"] != "ReportBatchItemFailures" {
				t.Errorf("mapping of %s lacks ReportBatchItemFailures", c.opts["--function-name"])
			}
		case "s3api put-bucket-notification-configuration":
			need(c, "bucket", c.opts["--bucket"])
			var n struct{ QueueConfigurations []struct{ QueueArn string } }
			_ = json.Unmarshal([]byte(c.opts["--notification-configuration"]), &n)
			if len(n.QueueConfigurations) == 0 {
				t.Error("bucket notification has no queue")
			}
			for _, q := range n.QueueConfigurations {
				if need(c, "queue", arnName(q.QueueArn)); arnName(q.QueueArn) != "yuxi-doc-parse" {
					t.Errorf("bucket notifications go to %s, want doc-parse's queue", q.QueueArn)
				}
			}
		case "scheduler create-schedule":
			var target struct{ Arn, RoleArn, Input string }
			_ = json.Unmarshal([]byte(c.opts["--target"]), &target)
			need(c, "function", arnName(target.Arn))
			need(c, "role", target.RoleArn)
			ev := cloudevents.NewEvent()
			if err := json.Unmarshal([]byte(target.Input), &ev); err != nil || ev.Type() == "" {
				t.Errorf("schedule %s input is not a structured CloudEvent: %v %s", c.opts["--name"], err, target.Input)
			}
		}
	}
	// Every function main has a Lambda.
	mains, _ := filepath.Glob(filepath.Join(repoRoot(t), "functions", "*", "main.go"))
	for _, m := range mains {
		fn := filepath.Base(filepath.Dir(m))
		if !created["function:yuxi-"+fn] {
			t.Errorf("functions/%s has no Lambda in the hook", fn)
		}
	}
	// The rules route each Yuxi event type to the functions the Knative Triggers do.
	triggers, err := devbroker.LoadTriggers(filepath.Join(repoRoot(t), "knative"), func(s string) (string, bool) { return "http://" + s + "/", true })
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range triggers {
		if !strings.HasPrefix(tr.Type, "io.yuxi.") {
			continue // cloud-specific types (GCS, PingSource) have their own wiring
		}
		if fn := strings.Trim(strings.TrimPrefix(tr.Subscriber, "http://"), "/"); !slices.Contains(routes[fn], tr.Type) {
			t.Errorf("Trigger %s sends %s to %s; the LocalStack rules do not (%v)", tr.Name, tr.Type, fn, routes[fn])
		}
	}
}
