package faas_test

import (
	"errors"
	"slices"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// Under functions-framework-go only Retry may surface as an error (a 500 that
// Eventarc redelivers); everything else is acknowledged.
func TestCloudEventFunctionOutcomes(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	ce := faas.CloudEventFunction(fn.router)

	unknown := stepEvent(t, "ev-unknown", "run_ok")
	unknown.SetType("io.yuxi.unknown.v1")
	cases := []struct {
		name    string
		ev      cloudevents.Event
		wantErr bool
	}{
		{"ack", stepEvent(t, "ev-ok", "run_ok"), false},
		{"permanent", stepEvent(t, "ev-perm", "run_perm"), false},
		{"malformed", unknown, false},
		{"retry", stepEvent(t, "ev-retry", "run_retry"), true},
	}
	for _, tc := range cases {
		err := ce(t.Context(), tc.ev)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
		}
		if tc.wantErr && !errors.Is(err, errTransient) {
			t.Errorf("%s: err = %v does not wrap the handler's error", tc.name, err)
		}
	}
	if got := fn.rec.ids(); !slices.Equal(got, []string{"ev-perm", "ev-unknown"}) {
		t.Errorf("recorded %v, want the permanent failure and the malformed event", got)
	}
}
