package runstream

import (
	"testing"
)

func TestCompactEnvelope(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, event, in, want string
	}{
		{
			name:  "metadata keeps run_type and source only",
			event: EventMetadata,
			in:    `{"schema_version":1,"run_id":"r","thread_id":"t","event":"metadata","payload":{"request_id":"q","agent_slug":"a","uid":"u","source":"chat","run_type":"chat"},"created_at":"x"}`,
			want:  `{"payload":{"run_type":"chat","source":"chat"},"run_id":"r","schema_version":1,"thread_id":"t"}`,
		},
		{
			name:  "tool call delta keeps args and a non-zero index; request id from the first item",
			event: EventMessages,
			in:    `{"run_id":"r","thread_id":null,"payload":{"items":[{"status":"loading","response":null,"request_id":"q2","stream_event":{"type":"tool_call_delta","message_id":"m","tool_call_id":"c1","name":"","args_delta":"{","index":0}},{"stream_event":{"type":"tool_call","name":"search","args":{},"index":2}}]}}`,
			want:  `{"payload":{"items":[{"status":"loading","stream_event":{"args_delta":"{","message_id":"m","tool_call_id":"c1","type":"tool_call_delta"}},{"stream_event":{"args":{},"index":2,"name":"search","type":"tool_call"}}]},"request_id":"q2","run_id":"r","thread_id":null}`,
		},
		{
			name:  "error chunk is compacted, request id lifted",
			event: EventError,
			in:    `{"run_id":"r","thread_id":"t","payload":{"retryable":true,"chunk":{"status":"error","error_type":"worker_error","error_message":"boom","request_id":"q","retryable":true,"thread_id":"t","response":""}}}`,
			want:  `{"payload":{"chunk":{"error_message":"boom","error_type":"worker_error","retryable":true,"status":"error"},"retryable":true},"request_id":"q","run_id":"r","thread_id":"t"}`,
		},
		{
			name:  "tool lifecycle event",
			event: EventCustom,
			in:    `{"run_id":"r","thread_id":"t","payload":{"name":"yuxi.stream_event","chunk":{"status":"stream_event","event":{"method":"tools","namespace":[],"data":{"event":"tool-finished","tool_call_id":"c1","tool_name":"s","output":"ok","error":null},"thread_id":"t"}}}}`,
			want:  `{"payload":{"chunk":{"event":{"data":{"event":"tool-finished","output":"ok","tool_call_id":"c1","tool_name":"s"},"method":"tools"},"status":"stream_event"},"name":"yuxi.stream_event"},"run_id":"r","thread_id":"t"}`,
		},
		{
			name:  "not JSON passes through",
			event: EventCustom,
			in:    `not json`,
			want:  `not json`,
		},
	}
	for _, c := range cases {
		got := compactEnvelope(c.event, []byte(c.in))
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
