package invoke

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// Interrupt kinds (agent_runs.error_type of an interrupted run).
const (
	InterruptQuestion = "ask_user_question_required"
	InterruptApproval = "human_approval_required"
)

// ChannelInput is POST /api/agent-invocation/channel/messages.
type ChannelInput struct {
	Channel     string  `json:"channel"`
	AccountID   string  `json:"account_id"`
	ChatID      *string `json:"chat_id"`
	ThreadID    *string `json:"thread_id"`
	SenderID    *string `json:"sender_id"`
	MessageID   *string `json:"message_id"`
	RequestID   *string `json:"request_id"`
	AgentSlug   string  `json:"agent_slug"`
	QueuePolicy string  `json:"queue_policy"`
	Message     struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"message"`
}

// ThreadState is what /state answers: the thread's queue and its latest run.
type ThreadState struct {
	Queue     queue.Snapshot `json:"queue"`
	LatestRun *run.View      `json:"latest_run"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// ChannelMessage takes a plain-text channel message in (policy steer by
// default, on the thread derived from (uid, channel, account_id, chat_id)
// unless thread_id is given), or runs a slash command: /state answers the
// thread's state, /approve resumes the latest run waiting for a tool
// approval with approve. The answer is {kind: run|command, …}.
func (s *Service) ChannelMessage(ctx context.Context, sub access.Subject, in ChannelInput) (map[string]any, error) {
	channel := strings.TrimSpace(in.Channel)
	if channel == "" {
		channel = "cli"
	}
	if len(channel) > 32 {
		return nil, failure.Unprocessable("invalid_channel", "channel must be at most 32 characters")
	}
	account := strings.TrimSpace(in.AccountID)
	if account == "" {
		account = "default"
	}
	slug := strings.TrimSpace(in.AgentSlug)
	if in.Message.Type != "" && in.Message.Type != "text" {
		return nil, failure.Unprocessable("invalid_message", "message.type must be text")
	}
	text := strings.TrimSpace(in.Message.Text)
	if text == "" {
		return nil, failure.Unprocessable("empty_query", "message.text must not be empty")
	}
	policy := strings.TrimSpace(in.QueuePolicy)
	if policy == "" {
		policy = queue.PolicySteer
	}
	if _, err := queue.ValidatePolicy(policy); err != nil {
		return nil, err
	}
	threadID := str(in.ThreadID)
	if threadID == "" {
		if str(in.ChatID) == "" {
			return nil, failure.Unprocessable("missing_thread", "give thread_id or chat_id")
		}
		threadID = HashID("channel_", sub.UID+":"+channel+":"+account+":"+str(in.ChatID))
	}
	external := str(in.MessageID)
	if external == "" {
		external = str(in.RequestID)
	}
	if external == "" {
		external = queue.NewID("msg_")
	}
	requestID := str(in.RequestID)
	if requestID == "" {
		chat := str(in.ChatID)
		if chat == "" {
			chat = threadID
		}
		requestID = HashID("channel_request_", sub.UID+":"+channel+":"+account+":"+chat+":"+external)
	} else if err := queue.ValidateRequestID(requestID); err != nil {
		return nil, err
	}
	if err := s.checkAgent(ctx, sub, slug); err != nil {
		return nil, err
	}
	if _, err := s.d.Threads.Ensure(ctx, sub.UID, threadID, slug, channel+" Channel Run", SourceChannel); err != nil {
		return nil, err
	}
	latest, err := s.d.Runs.LatestForThread(ctx, sub.UID, slug, threadID)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(text, "/") {
		name, args, _ := strings.Cut(strings.TrimPrefix(text, "/"), " ")
		if strings.TrimSpace(args) != "" && (name == "state" || name == "approve") {
			return nil, failure.Unprocessable("invalid_command", "/%s takes no arguments", name)
		}
		switch name {
		case "state":
			snap, err := s.d.Queue.Snapshot(ctx, sub.UID, slug, threadID)
			if err != nil {
				return nil, err
			}
			st := ThreadState{Queue: snap}
			if latest != nil {
				v := latest.View()
				st.LatestRun = &v
			}
			return map[string]any{"kind": "command", "command": "state", "thread_id": threadID, "state": st}, nil
		case "approve":
			parent, err := approvalParent(latest, requestID)
			if err != nil {
				return nil, err
			}
			res, err := s.d.Queue.Resume(ctx, queue.ResumeInput{Subject: sub, AgentSlug: slug, ThreadID: threadID,
				Resume: json.RawMessage(`{"decisions":[{"type":"approve"}]}`), CreatedByRunID: parent, RequestID: requestID})
			if err != nil {
				return nil, err
			}
			return map[string]any{"kind": "command", "command": "approve", "thread_id": threadID, "run": res}, nil
		}
		return nil, failure.Unprocessable("unsupported_command", "unsupported slash command /%s (supported: /state, /approve)", name)
	}
	if latest != nil && latest.Status == run.StatusInterrupted && (latest.ErrorType == nil || *latest.ErrorType != InterruptApproval) {
		return nil, failure.Conflict("ask_user_question_unsupported",
			"the thread waits for an answer to a question, which channels cannot give yet").With(map[string]any{"run_id": latest.ID})
	}
	out, err := s.d.Queue.Submit(ctx, queue.Submission{Subject: sub, Query: text, AgentSlug: slug, ThreadID: threadID,
		RequestID: requestID, QueuePolicy: policy, Source: SourceChannel, Channel: channel})
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(out)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["kind"], m["channel"] = "run", channel
	return m, nil
}

// approvalParent is the interrupted run an /approve resumes: the latest
// run when it waits for an approval, or — for a replayed /approve — the
// parent of the resume run this request id already created.
func approvalParent(latest *run.Run, requestID string) (string, error) {
	if latest != nil && latest.RequestID == requestID && latest.RunType == run.TypeResume && latest.CreatedByRunID != nil {
		return *latest.CreatedByRunID, nil
	}
	if latest == nil || latest.Status != run.StatusInterrupted {
		return "", failure.Conflict("no_pending_approval", "no run is waiting for an approval")
	}
	if latest.ErrorType == nil || *latest.ErrorType != InterruptApproval {
		return "", failure.Conflict("ask_user_question_unsupported", "the latest run waits for an answer to a question, not for an approval")
	}
	return latest.ID, nil
}
