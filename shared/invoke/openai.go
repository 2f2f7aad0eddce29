package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// The OpenAI-compatible endpoint (beyond the original): agents as models.
// A completion is a run on a thread: X-Yuxi-Thread-Id (a thread of the
// caller) continues that thread; otherwise the request's `user` continues
// the thread derived from (caller uid, agent, user); otherwise every
// request gets a fresh thread. Tool calls stay the agent's own; a question
// (ask_user_question) or a pending tool approval ends the completion with
// finish_reason "stop" and the question as content, and the next request on
// the thread answers it with its last user message (/approve or /reject
// for an approval).

// Model is an entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Models lists the agents sub may use, as models (id = agent slug; the
// model "slug@provider:model" runs that agent on that model).
func (s *Service) Models(ctx context.Context, sub access.Subject) ([]Model, error) {
	agents, err := s.d.Agents.List(ctx, sub, false)
	if err != nil {
		return nil, err
	}
	out := make([]Model, 0, len(agents))
	for _, a := range agents {
		owner := "yuxi"
		if a.CreatedBy != nil && !a.IsBuiltin {
			owner = *a.CreatedBy
		}
		out = append(out, Model{ID: a.Slug, Object: "model", Created: a.CreatedAt.Unix(), OwnedBy: owner})
	}
	return out, nil
}

// CompletionRequest is the part of POST /v1/chat/completions the platform
// reads; sampling parameters and tools belong to the agent and are ignored.
type CompletionRequest struct {
	Model         string        `json:"model"`
	Messages      []ChatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
}

// Started is a completion whose run has been created.
type Started struct {
	ID       string // chatcmpl-<run id>
	Model    string
	RunID    string
	ThreadID string
	Created  int64
}

// StartCompletion maps the request onto a thread and creates its run: a
// new message through the intake (policy reject: a busy thread is 409
// thread_busy), or the resume of the thread's interrupted run.
func (s *Service) StartCompletion(ctx context.Context, sub access.Subject, req CompletionRequest, threadHeader string) (Started, error) {
	slug, spec, _ := strings.Cut(strings.TrimSpace(req.Model), "@")
	if slug == "" {
		return Started{}, failure.Invalid("missing_model", "model is required (an agent slug, optionally slug@provider:model)")
	}
	if err := s.checkAgent(ctx, sub, slug); err != nil {
		if errors.Is(err, agent.ErrNotFound) {
			return Started{}, failure.NotFound("model_not_found", "the model %q does not exist or you do not have access to it", req.Model)
		}
		return Started{}, err
	}
	i, err := lastUser(req.Messages)
	if err != nil {
		return Started{}, err
	}
	msg, err := ParseContent(req.Messages[i].Content)
	if err != nil {
		return Started{}, err
	}
	var threadID string
	continued := true
	switch {
	case strings.TrimSpace(threadHeader) != "":
		t, err := s.d.Threads.Get(ctx, sub.UID, strings.TrimSpace(threadHeader))
		if err != nil {
			return Started{}, err
		}
		threadID = t.ID
	case strings.TrimSpace(req.User) != "":
		threadID = HashID("openai_", sub.UID+":"+slug+":"+strings.TrimSpace(req.User))
	default:
		threadID, continued = queue.NewID("openai_"), false
	}
	if _, err := s.d.Threads.Ensure(ctx, sub.UID, threadID, slug, "OpenAI API", SourceOpenAI); err != nil {
		return Started{}, err
	}
	st := Started{ID: "", Model: req.Model, ThreadID: threadID, Created: time.Now().Unix()}
	if continued {
		latest, err := s.d.Runs.LatestForThread(ctx, sub.UID, slug, threadID)
		if err != nil {
			return Started{}, err
		}
		waiting := latest != nil && latest.Status == run.StatusInterrupted
		if waiting && latest.ErrorType != nil && *latest.ErrorType == InterruptApproval {
			// Expired approvals no longer hold the thread: any text but
			// /approve and /reject (those answer 409 approval_expired) is a
			// new message, whose intake resolves them as rejected.
			if waiting, err = s.approvalWaits(ctx, latest.ID, msg.Text); err != nil {
				return Started{}, err
			}
		}
		if waiting {
			answer, err := s.answer(ctx, *latest, msg.Text)
			if err != nil {
				return Started{}, err
			}
			res, err := s.d.Queue.Resume(ctx, queue.ResumeInput{Subject: sub, AgentSlug: slug, ThreadID: threadID,
				Resume: answer, CreatedByRunID: latest.ID})
			if err != nil {
				return Started{}, err
			}
			st.RunID, st.ID = res.RunID, "chatcmpl-"+res.RunID
			return st, nil
		}
	} else {
		msg.Text = foldHistory(req.Messages[:i], msg.Text)
	}
	out, err := s.d.Queue.Submit(ctx, queue.Submission{Subject: sub, Query: msg.Text, ImageContent: msg.Image, AgentSlug: slug,
		ThreadID: threadID, ModelSpec: spec, QueuePolicy: queue.PolicyReject, Source: SourceOpenAI, Channel: ChannelAPI})
	if err != nil {
		return Started{}, err
	}
	if out.RunID == nil {
		return Started{}, failure.Conflict("thread_busy", "the conversation has a completion in progress; retry when it ends")
	}
	st.RunID, st.ID = *out.RunID, "chatcmpl-"+*out.RunID
	return st, nil
}

// foldHistory gives a fresh thread the conversation the client sent
// before its last user message, as text ahead of it: the client owns that
// history, the agent keeps its own system prompt.
func foldHistory(prior []ChatMessage, last string) string {
	var b strings.Builder
	for _, m := range prior {
		in, err := ParseContent(m.Content)
		if err != nil || strings.TrimSpace(in.Text) == "" {
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", m.Role, in.Text)
	}
	if b.Len() == 0 {
		return last
	}
	return "Conversation so far:\n" + b.String() + "\nuser: " + last
}

// approvalWaits: whether text answers interrupted run runID's approval —
// always for /approve and /reject, otherwise only while a waiting call has
// not expired.
func (s *Service) approvalWaits(ctx context.Context, runID, text string) (bool, error) {
	if t := strings.TrimSpace(text); t == "/approve" || t == "/reject" {
		return true, nil
	}
	calls, err := s.d.Runs.InterruptedCalls(ctx, runID)
	if err != nil {
		return false, err
	}
	return !run.ApprovalsExpired(calls, time.Now()), nil
}

// answer turns the last user message into the resume payload of the
// interrupted run r: /approve or /reject for an approval; for questions a
// JSON object keyed by question id as it is, any other text the answer to
// the first question.
func (s *Service) answer(ctx context.Context, r run.Run, text string) (json.RawMessage, error) {
	text = strings.TrimSpace(text)
	if r.ErrorType != nil && *r.ErrorType == InterruptApproval {
		switch text {
		case "/approve":
			return json.RawMessage(`{"decisions":[{"type":"approve"}]}`), nil
		case "/reject":
			return json.RawMessage(`{"decisions":[{"type":"reject"}]}`), nil
		}
		return nil, failure.Conflict("approval_pending", "a tool call waits for approval: answer /approve or /reject")
	}
	if strings.HasPrefix(text, "{") {
		var obj map[string]any
		if json.Unmarshal([]byte(text), &obj) == nil && len(obj) > 0 {
			return json.RawMessage(text), nil
		}
	}
	qs, err := s.questions(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	id := "q-1"
	if len(qs) > 0 && qs[0].ID != "" {
		id = qs[0].ID
	}
	b, _ := json.Marshal(map[string]string{id: text})
	return b, nil
}

type question struct {
	ID       string `json:"question_id"`
	Question string `json:"question"`
	Options  []struct {
		Label string `json:"label"`
		Value string `json:"value"`
	} `json:"options"`
}

// questions reads the questions run id waits on.
func (s *Service) questions(ctx context.Context, runID string) ([]question, error) {
	calls, err := s.d.Runs.InterruptedCalls(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []question
	for _, c := range calls {
		if c.Output == nil {
			continue
		}
		var doc struct {
			Questions []question `json:"questions"`
		}
		if json.Unmarshal([]byte(*c.Output), &doc) == nil {
			out = append(out, doc.Questions...)
		}
	}
	return out, nil
}

// Prompt renders what an interrupted run waits for as the completion's
// content.
func (s *Service) Prompt(ctx context.Context, r run.Run) (string, error) {
	if r.ErrorType != nil && *r.ErrorType == InterruptApproval {
		m := "A tool call waits for your approval."
		if r.ErrorMessage != nil && *r.ErrorMessage != "" {
			m = *r.ErrorMessage
		}
		return m + "\nReply /approve or /reject.", nil
	}
	qs, err := s.questions(ctx, r.ID)
	if err != nil {
		return "", err
	}
	return renderQuestions(qs, r.ErrorMessage), nil
}

func renderQuestions(qs []question, fallback *string) string {
	if len(qs) == 0 {
		if fallback != nil {
			return *fallback
		}
		return "The agent waits for your answer."
	}
	var b strings.Builder
	for i, q := range qs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(q.Question)
		for _, o := range q.Options {
			fmt.Fprintf(&b, "\n- %s", o.Label)
			if o.Value != "" && o.Value != o.Label {
				fmt.Fprintf(&b, " (%s)", o.Value)
			}
		}
	}
	if len(qs) > 1 {
		ids := make([]string, len(qs))
		for i, q := range qs {
			ids[i] = q.ID
		}
		fmt.Fprintf(&b, "\n\nAnswer the first question, or all with a JSON object keyed by %s.", strings.Join(ids, ", "))
	}
	return b.String()
}

// Completion is a chat.completion.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "chat.completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is a choice of a Completion.
type CompletionChoice struct {
	Index        int         `json:"index"`
	Message      CallMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Logprobs     *struct{}   `json:"logprobs"`
}

// ErrRunFailed is a completion whose run failed or was cancelled.
func errRun(r run.Run) error {
	code, msg := "run_"+r.Status, "the agent run "+r.Status
	if r.ErrorType != nil && *r.ErrorType != "" {
		code = *r.ErrorType
	}
	if r.ErrorMessage != nil && *r.ErrorMessage != "" {
		msg = *r.ErrorMessage
	}
	return failure.New(failure.KindInternal, code, "%s", msg).With(map[string]any{"run_id": r.ID})
}

// Complete waits for st's run (bounded by SyncWait) and answers it as a
// chat.completion.
func (s *Service) Complete(ctx context.Context, st Started) (Completion, error) {
	r, err := s.Wait(ctx, st.RunID)
	if err != nil {
		return Completion{}, err
	}
	var content string
	switch r.Status {
	case run.StatusCompleted:
		if content, err = s.d.Runs.Output(ctx, r); err != nil {
			return Completion{}, err
		}
	case run.StatusInterrupted:
		if content, err = s.Prompt(ctx, r); err != nil {
			return Completion{}, err
		}
	default:
		return Completion{}, errRun(r)
	}
	return Completion{ID: st.ID, Object: "chat.completion", Created: st.Created, Model: st.Model, Usage: CompleteUsage(r.TokenUsage),
		Choices: []CompletionChoice{{Message: CallMessage{Role: "assistant", Content: content}, FinishReason: "stop"}}}, nil
}

// Chunk is a chat.completion.chunk.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"` // "chat.completion.chunk"
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
}

// ChunkChoice is a choice of a Chunk.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is a streamed piece of the assistant message.
type Delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// StreamSink receives a streamed completion: chunks, then at most one
// error (a failed run), then the end ([DONE]).
type StreamSink interface {
	Chunk(c Chunk) error
	Error(err error) error
	Idle() error // nothing happened for a heartbeat interval
}

// Stream follows st's run on its Redis stream and sends it to sink as
// chunks: the role first, each text delta of the agent's messages, the
// question of an interrupt, a final chunk with finish_reason "stop" and,
// with includeUsage, a usage chunk (choices empty). A failed or cancelled
// run is sent as an error. It returns when the run ends, the sink fails, or
// ctx ends. A step the platform retried is not taken back: its text was
// already sent (the run SSE's yuxi.retry has no OpenAI counterpart).
func (s *Service) Stream(ctx context.Context, st Started, includeUsage bool, heartbeat time.Duration, sink StreamSink) error {
	base := func() Chunk {
		return Chunk{ID: st.ID, Object: "chat.completion.chunk", Created: st.Created, Model: st.Model}
	}
	send := func(d Delta, finish *string) error {
		c := base()
		c.Choices = []ChunkChoice{{Delta: d, FinishReason: finish}}
		return sink.Chunk(c)
	}
	if err := send(Delta{Role: "assistant", Content: new(string)}, nil); err != nil {
		return err
	}
	if heartbeat <= 0 {
		heartbeat = 15 * time.Second
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	cursor := "0-0"
	for {
		sub := s.d.Hub.Subscribe(s.d.Hub.RunKey(st.RunID), cursor)
		end, err := func() (string, error) {
			defer sub.Close()
			for {
				select {
				case e, ok := <-sub.C():
					if !ok {
						if errors.Is(sub.Err(), runstream.ErrHubClosed) {
							return "", failure.New(failure.KindUnavailable, "shutting_down", "the server is shutting down")
						}
						return "", nil // resubscribe after the last entry
					}
					cursor = e.ID
					status, err := s.forward(e, send)
					if err != nil || status != "" {
						return status, err
					}
				case <-tick.C:
					if err := sink.Idle(); err != nil {
						return "", err
					}
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
		}()
		if err != nil {
			return err
		}
		if end == "" {
			continue
		}
		r, err := s.d.Runs.Get(ctx, st.RunID)
		if err != nil {
			return err
		}
		if r.Status != run.StatusCompleted && r.Status != run.StatusInterrupted {
			return sink.Error(errRun(r))
		}
		stop := "stop"
		if err := send(Delta{}, &stop); err != nil {
			return err
		}
		if includeUsage {
			c := base()
			c.Choices = []ChunkChoice{}
			c.Usage = CompleteUsage(r.TokenUsage)
			if c.Usage == nil {
				c.Usage = &Usage{}
			}
			return sink.Chunk(c)
		}
		return nil
	}
}

// forward sends the text of one run-stream entry; it answers the run's
// status at its end event.
func (s *Service) forward(e runstream.Entry, send func(Delta, *string) error) (string, error) {
	var env struct {
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(e.Data, &env) != nil {
		return "", nil
	}
	switch e.Event {
	case runstream.EventMessages:
		var m struct {
			Items []struct {
				StreamEvent struct {
					Type    string `json:"type"`
					Content string `json:"content"`
				} `json:"stream_event"`
			} `json:"items"`
		}
		if json.Unmarshal(env.Payload, &m) != nil {
			return "", nil
		}
		var b strings.Builder
		for _, it := range m.Items {
			if it.StreamEvent.Type == runstream.StreamMessageDelta {
				b.WriteString(it.StreamEvent.Content)
			}
		}
		if b.Len() > 0 {
			text := b.String()
			return "", send(Delta{Content: &text}, nil)
		}
	case runstream.EventInterrupt:
		var in struct {
			Reason string `json:"reason"`
			Chunk  struct {
				Message   string     `json:"message"`
				Questions []question `json:"questions"`
			} `json:"chunk"`
		}
		if json.Unmarshal(env.Payload, &in) != nil || in.Reason == "cancelled" {
			return "", nil
		}
		text := renderQuestions(in.Chunk.Questions, &in.Chunk.Message)
		if in.Reason == InterruptApproval || in.Reason == "human_approval" { // the stream's reason (the original's name); the error_type before
			text = in.Chunk.Message + "\nReply /approve or /reject."
		}
		return "", send(Delta{Content: &text}, nil)
	case runstream.EventEnd:
		var end runstream.End
		_ = json.Unmarshal(env.Payload, &end)
		if end.Status == "" {
			end.Status = "unknown"
		}
		return end.Status, nil
	}
	return "", nil
}
