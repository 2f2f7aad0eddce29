//go:build unix

package faas_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestLambdaUnderRuntimeEmulator runs testdata/lambdafn under the AWS Lambda
// Runtime Interface Emulator, the same runtime API loop a provided.al2023
// function runs in, and invokes it with an SQS batch.
//
// Install the emulator with:
//
//	go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d
func TestLambdaUnderRuntimeEmulator(t *testing.T) {
	t.Parallel()
	goTool := needTool(t, "go")
	gopath := goEnv(t, goTool, "GOPATH")
	rie := needTool(t, "aws-lambda-rie", goEnv(t, goTool, "GOBIN"), filepath.Join(gopath, "bin"))
	bin := buildTestFunction(t, goTool, "lambdafn")

	addr := net.JoinHostPort("127.0.0.1", freePort(t))
	runtimeAPI := net.JoinHostPort("127.0.0.1", freePort(t))
	cmd := exec.CommandContext(t.Context(), rie,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", runtimeAPI,
		"--log-level", "error",
		bin)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = childEnv("AWS_LAMBDA_FUNCTION_TIMEOUT=30")
	proc := start(t, cmd)
	waitListening(t, addr)

	invoke := func(payload []byte) []byte {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/2015-03-31/functions/function/invocations", "application/json", bytes.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("invoke: status %d: %s", resp.StatusCode, body)
		}
		return body
	}

	// The first invocation also starts the function (init), which then
	// announces itself through OnReady.
	body := invoke(readFixture(t, "sqs_eventbridge.json"))
	proc.waitLine("ready")
	var got struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("response %s: %v", body, err)
	}
	var ids []string
	for _, f := range got.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if want := []string{msgRetry, msgDirectRetry}; !slices.Equal(ids, want) {
		t.Errorf("batchItemFailures = %v, want %v (response %s)", ids, want, body)
	}
	for _, line := range []string{"handled run_ok", "handled run_ok_plain", "recorded 2c3d4e5f6a7b40718293a4b5c6d7e8f2"} {
		proc.waitLine(line)
	}

	// A directly delivered EventBridge event whose handler asks for a retry
	// comes back as a function error, which makes Lambda's async retry apply.
	retry := bytes.ReplaceAll(readFixture(t, "eventbridge_cloudevent.json"), []byte("run_ok_eventbridge"), []byte("run_retry_eventbridge"))
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if body := invoke(retry); json.Unmarshal(body, &fnErr) != nil || fnErr.ErrorMessage == "" {
		t.Errorf("retry: response %s, want a function error", body)
	}
}
