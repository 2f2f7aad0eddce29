package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
)

// agentCall is POST /api/agent-invocation/agent-call/runs (shared/invoke).
func (s *Server) agentCall(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in invoke.AgentCallInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.inv.AgentCall(r.Context(), subject(p), in)
	if err != nil {
		return err
	}
	if out.Intake != nil { // queued or rejected: the intake answer, as the original
		writeJSON(w, http.StatusOK, out.Intake)
		return nil
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// agentCallResult is POST /api/agent-invocation/agent-call/runs/result.
func (s *Server) agentCallResult(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		RunID     string `json:"run_id"`
		AgentSlug string `json:"agent_slug"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.inv.AgentCallResult(r.Context(), p.UID, in.RunID, in.AgentSlug)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// channelMessage is POST /api/agent-invocation/channel/messages.
func (s *Server) channelMessage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in invoke.ChannelInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.inv.ChannelMessage(r.Context(), subject(p), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// evalRun is POST /api/agent-invocation/eval/runs: one sample, blocking.
func (s *Server) evalRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in invoke.EvalInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.inv.EvalRun(r.Context(), subject(p), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
