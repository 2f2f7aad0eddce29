// Package cloudbustest is a protocol-level fake of the AWS endpoints the
// cloudbus publishers call: EventBridge PutEvents (awsJson1_1) and SQS
// SendMessageBatch (awsJson1_0) on one HTTP server that verifies every
// request's SigV4 signature (written from the specification, not with the
// SDK's signer) and records what it accepted.
//
// Imported by: shared/cloudbus's tests, tests/bench.
// May import: the standard library and the AWS SDK.
package cloudbustest

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

const (
	Key    = "AKIDEXAMPLE"
	Secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	Token  = "session-token-example"
	Region = "eu-west-1"
)

// AWS speaks the JSON protocols of EventBridge (awsJson1_1, target
// AWSEvents.PutEvents) and SQS (awsJson1_0, target AmazonSQS.SendMessageBatch)
// on one HTTP endpoint. It rejects any request whose SigV4 signature does
// not verify against the fake credentials, and records what it accepted.
// Entries can be scripted to fail once per key (event type or message body
// substring).
type AWS struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	puts     [][]PutEntry // accepted PutEvents requests
	sends    []SendBatch  // accepted SendMessageBatch requests
	failOnce map[string]string
	down     bool // answer every request 500
	badSig   int  // requests refused for their signature
	requests int  // signed requests received
}

type PutEntry struct {
	Source, DetailType, Detail, EventBusName string
	Time                                     json.Number
}

type SendEntry struct {
	Id, MessageBody, MessageGroupId, MessageDeduplicationId string
}

type SendBatch struct {
	QueueUrl string
	Entries  []SendEntry
}

// NewAWS starts the fake; Close stops it.
func NewAWS() *AWS {
	f := &AWS{failOnce: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	return f
}

// Close stops the server.
func (f *AWS) Close() { f.srv.Close() }

// Puts returns the accepted PutEvents requests' entries.
func (f *AWS) Puts() [][]PutEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]PutEntry(nil), f.puts...)
}

// Sends returns the accepted SendMessageBatch requests.
func (f *AWS) Sends() []SendBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]SendBatch(nil), f.sends...)
}

// BadSignatures is how many requests failed SigV4 verification.
func (f *AWS) BadSignatures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.badSig
}

// Requests is how many correctly signed requests arrived.
func (f *AWS) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// Reset forgets what was recorded.
func (f *AWS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts, f.sends, f.requests = nil, nil, 0
}

// Config is an AWS configuration signing with the fake credentials and
// sending to the fake; the SDK's own retries are off (the relay retries).
func (f *AWS) Config() aws.Config {
	return aws.Config{
		Region:           Region,
		Credentials:      credentials.NewStaticCredentialsProvider(Key, Secret, Token),
		BaseEndpoint:     aws.String(f.srv.URL),
		RetryMaxAttempts: 1,
		HTTPClient:       f.srv.Client(),
	}
}

// EventBridge returns a client of the fake.
func (f *AWS) EventBridge() *eventbridge.Client { return eventbridge.NewFromConfig(f.Config()) }

// SQS returns a client of the fake.
func (f *AWS) SQS() *sqs.Client { return sqs.NewFromConfig(f.Config()) }

func (f *AWS) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	target := r.Header.Get("X-Amz-Target")
	service, contentType := "", ""
	switch target {
	case "AWSEvents.PutEvents":
		service, contentType = "events", "application/x-amz-json-1.1"
	case "AmazonSQS.SendMessageBatch":
		service, contentType = "sqs", "application/x-amz-json-1.0"
	default:
		awsError(w, 400, "UnknownOperationException", "target "+target)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("Content-Type") != contentType {
		awsError(w, 400, "SerializationException", fmt.Sprintf("%s %s content-type %q", r.Method, r.URL.Path, r.Header.Get("Content-Type")))
		return
	}
	if err := verifySigV4(r, body, service); err != nil {
		f.mu.Lock()
		f.badSig++
		f.mu.Unlock()
		awsError(w, 403, "SignatureDoesNotMatch", err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if f.down {
		awsError(w, 500, "InternalFailure", "fake is down")
		return
	}
	w.Header().Set("Content-Type", contentType)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields() // a field the real API does not have is a bug
	dec.UseNumber()
	switch service {
	case "events":
		var in struct{ Entries []PutEntry }
		if err := dec.Decode(&in); err != nil || len(in.Entries) == 0 || len(in.Entries) > 10 {
			awsError(w, 400, "ValidationException", fmt.Sprintf("entries: %d, %v", len(in.Entries), err))
			return
		}
		type result struct {
			EventId      string `json:",omitempty"`
			ErrorCode    string `json:",omitempty"`
			ErrorMessage string `json:",omitempty"`
		}
		var out struct {
			FailedEntryCount int
			Entries          []result
		}
		for i, e := range in.Entries {
			if e.Source == "" || e.DetailType == "" || !json.Valid([]byte(e.Detail)) || e.EventBusName == "" {
				awsError(w, 400, "ValidationException", fmt.Sprintf("entry %d incomplete: %+v", i, e))
				return
			}
			if code := f.takeFailure(e.DetailType + " " + e.Detail); code != "" {
				out.FailedEntryCount++
				out.Entries = append(out.Entries, result{ErrorCode: code, ErrorMessage: "scripted"})
				continue
			}
			out.Entries = append(out.Entries, result{EventId: fmt.Sprintf("eb-%d-%d", len(f.puts), i)})
		}
		f.puts = append(f.puts, in.Entries)
		_ = json.NewEncoder(w).Encode(out)
	case "sqs":
		var in SendBatch
		if err := dec.Decode(&in); err != nil || len(in.Entries) == 0 || len(in.Entries) > 10 || in.QueueUrl == "" {
			awsError(w, 400, "InvalidParameterValue", fmt.Sprintf("entries: %d, %v", len(in.Entries), err))
			return
		}
		fifo := strings.HasSuffix(in.QueueUrl, ".fifo")
		type ok struct{ Id, MessageId, MD5OfMessageBody string }
		type failed struct {
			Id, Code, Message string
			SenderFault       bool
		}
		out := struct {
			Successful []ok
			Failed     []failed
		}{Successful: []ok{}, Failed: []failed{}}
		for _, e := range in.Entries {
			if fifo != (e.MessageGroupId != "") || fifo != (e.MessageDeduplicationId != "") {
				awsError(w, 400, "InvalidParameterValue", "MessageGroupId and MessageDeduplicationId are for FIFO queues, and required there")
				return
			}
			if code := f.takeFailure(e.MessageBody); code != "" {
				out.Failed = append(out.Failed, failed{Id: e.Id, Code: code, Message: "scripted", SenderFault: code == "InvalidMessageContents"})
				continue
			}
			sum := md5.Sum([]byte(e.MessageBody))
			out.Successful = append(out.Successful, ok{Id: e.Id, MessageId: fmt.Sprintf("m-%d-%s", len(f.sends), e.Id), MD5OfMessageBody: hex.EncodeToString(sum[:])})
		}
		f.sends = append(f.sends, in)
		_ = json.NewEncoder(w).Encode(out)
	}
}

// takeFailure returns the scripted error code for the first key contained
// in s, once. f.mu is held.
func (f *AWS) takeFailure(s string) string {
	for k, code := range f.failOnce {
		if strings.Contains(s, k) {
			delete(f.failOnce, k)
			return code
		}
	}
	return ""
}

// FailEntryOnce makes the first entry containing key fail once with code
// (a per-entry failure; InvalidMessageContents is the sender's fault on SQS).
func (f *AWS) FailEntryOnce(key, code string) {
	f.mu.Lock()
	f.failOnce[key] = code
	f.mu.Unlock()
}

// SetDown makes every request fail with 500 InternalFailure.
func (f *AWS) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func awsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}

// verifySigV4 checks the request's Signature Version 4 header signature
// (written from the specification, not with the SDK's signer): the
// credential scope names the fake key, region and service; the signed
// headers include host and x-amz-date and the session token; the signature
// matches the canonical request over the actual body; the date is recent.
func verifySigV4(r *http.Request, body []byte, service string) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("authorization %q is not AWS4-HMAC-SHA256", auth)
	}
	parts := map[string]string{}
	for _, p := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		parts[k] = v
	}
	cred := strings.Split(parts["Credential"], "/")
	if len(cred) != 5 || cred[0] != Key || cred[2] != Region || cred[3] != service || cred[4] != "aws4_request" {
		return fmt.Errorf("credential scope %q, want %s/<date>/%s/%s/aws4_request", parts["Credential"], Key, Region, service)
	}
	amzDate := r.Header.Get("X-Amz-Date")
	ts, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, cred[1]) || time.Since(ts).Abs() > 15*time.Minute {
		return fmt.Errorf("x-amz-date %q (scope date %s)", amzDate, cred[1])
	}
	if r.Header.Get("X-Amz-Security-Token") != Token {
		return fmt.Errorf("session token missing")
	}
	signed := strings.Split(parts["SignedHeaders"], ";")
	for _, must := range []string{"host", "x-amz-date", "x-amz-security-token", "content-type", "x-amz-target"} {
		if !contains(signed, must) {
			return fmt.Errorf("signed headers %v lack %s", signed, must)
		}
	}
	if !sort.StringsAreSorted(signed) {
		return fmt.Errorf("signed headers not sorted: %v", signed)
	}
	var canon strings.Builder
	canon.WriteString(r.Method + "\n")
	canon.WriteString(uriEncodePath(r.URL.EscapedPath()) + "\n")
	canon.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = fmt.Sprint(r.ContentLength)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		canon.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	canon.WriteString("\n" + parts["SignedHeaders"] + "\n")
	payload := sha256.Sum256(body)
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != hex.EncodeToString(payload[:]) {
		return fmt.Errorf("x-amz-content-sha256 does not match the body")
	}
	canon.WriteString(hex.EncodeToString(payload[:]))
	creq := sha256.Sum256([]byte(canon.String()))
	scope := strings.Join(cred[1:], "/")
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(creq[:])
	key := hmacSHA256([]byte("AWS4"+Secret), cred[1])
	key = hmacSHA256(key, Region)
	key = hmacSHA256(key, service)
	key = hmacSHA256(key, "aws4_request")
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(parts["Signature"])) {
		return fmt.Errorf("signature mismatch (canonical request:\n%s)", canon.String())
	}
	return nil
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

func uriEncodePath(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			out = append(out, url.QueryEscape(k)+"="+strings.ReplaceAll(url.QueryEscape(v), "+", "%20"))
		}
	}
	return strings.Join(out, "&")
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
