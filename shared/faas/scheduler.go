package faas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// TypeEvaluationTick is the event a scheduler tick becomes: the evaluation
// scheduler's type (events' evaluation types), whose data is
// {"time": <scheduled time, RFC 3339>, "reason": <≤ 64 characters>}.
const TypeEvaluationTick = "io.yuxi.evaluation.tick.v1"

// Scheduler tick shapes that carry no CloudEvent of their own and are
// decoded here into a tick:
//
//   - an EventBridge scheduled rule's event (detail-type "Scheduled Event",
//     source "aws.events", the rule's ARN in resources), invoking the
//     function directly or through an SQS queue;
//   - a Cloud Scheduler job with an HTTP target (X-CloudScheduler-JobName and
//     X-CloudScheduler-ScheduleTime headers, any body).
//
// EventBridge Scheduler (its Input templated as a structured CloudEvent with
// <aws.scheduler.*> context attributes) and Cloud Scheduler with a Pub/Sub
// target (a ce-type attribute) deliver CloudEvents and need no decoding.
const (
	eventBridgeScheduled = "Scheduled Event"
	eventBridgeSource    = "aws.events"
)

// tickEvent builds a tick for schedule (a rule or job name) due at at. The
// id is the one the scheduler gives the firing, so a redelivery is the same
// event.
func tickEvent(id, source, schedule string, at time.Time) cloudevents.Event {
	ev := cloudevents.NewEvent()
	ev.SetID(id)
	ev.SetSource(source)
	ev.SetType(TypeEvaluationTick)
	ev.SetSubject(schedule)
	if !at.IsZero() {
		ev.SetTime(at)
	}
	data := map[string]string{"reason": truncate("schedule "+schedule, 64)}
	if !at.IsZero() {
		data["time"] = at.UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(data)
	_ = ev.SetData(cloudevents.ApplicationJSON, b)
	return ev
}

// scheduledRuleTick decodes an EventBridge scheduled rule's event; ok=false
// when the event is not one.
func scheduledRuleTick(detailType, source, id string, resources []string, at time.Time) (cloudevents.Event, bool) {
	if detailType != eventBridgeScheduled || source != eventBridgeSource {
		return cloudevents.Event{}, false
	}
	rule, src := "", source
	if len(resources) > 0 {
		src = resources[0]
		rule = resources[0][strings.LastIndex(resources[0], "/")+1:]
	}
	return tickEvent(id, src, rule, at), true
}

// cloudSchedulerTick decodes a Cloud Scheduler HTTP target request; ok=false
// when the request does not come from Cloud Scheduler. The id hashes the job
// and its schedule time, which Cloud Scheduler keeps on its retries.
func cloudSchedulerTick(h http.Header) (cloudevents.Event, bool) {
	job := h.Get("X-CloudScheduler-JobName")
	if job == "" {
		return cloudevents.Event{}, false
	}
	scheduled := h.Get("X-CloudScheduler-ScheduleTime")
	at, _ := time.Parse(time.RFC3339Nano, scheduled)
	sum := sha256.Sum256([]byte(job + "\x00" + scheduled))
	return tickEvent(hex.EncodeToString(sum[:16]), "//cloudscheduler.googleapis.com/jobs/"+job, job, at), true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
