package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/evaluation"
)

// Agent evaluation suites (/api/evaluation/suites…), served by
// shared/evaluation; answers are wrapped as the other evaluation routes'.

// OwnSuite: {suite_id} is one of the caller's own evaluation suites (a
// suite runs its agent as its creator, so no one else reads or runs it).
const OwnSuite Check = "suite_owner"

// suiteRoutes are the suite routes (any user: a suite evaluates an agent the
// caller may use).
func (s *Server) suiteRoutes() []Route {
	return []Route{
		{"GET", "/api/evaluation/suites", User, NoCheck, s.listSuites}, // the caller's own suites
		{"POST", "/api/evaluation/suites", User, NoCheck, s.createSuite},
		{"GET", "/api/evaluation/suites/{suite_id}", User, OwnSuite, s.getSuite},
		{"PUT", "/api/evaluation/suites/{suite_id}", User, OwnSuite, s.updateSuite},
		{"DELETE", "/api/evaluation/suites/{suite_id}", User, OwnSuite, s.deleteSuite},
		{"POST", "/api/evaluation/suites/{suite_id}/runs", User, OwnSuite, s.startSuiteRun},
		{"GET", "/api/evaluation/suites/{suite_id}/runs", User, OwnSuite, s.listSuiteRuns},
		{"GET", "/api/evaluation/suites/{suite_id}/runs/{run_id}", User, OwnSuite, s.getSuiteRun},
	}
}

func (s *Server) listSuites(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) { return ev.Suites(r.Context(), subject(p)) })
}

func (s *Server) createSuite(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in evaluation.SuiteInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) { return ev.CreateSuite(r.Context(), subject(p), in) })
}

func (s *Server) getSuite(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.GetSuite(r.Context(), subject(p), r.PathValue("suite_id"))
	})
}

// updateSuite checks the suite is the caller's before reading the body (a
// malformed body for another's suite is still 404).
func (s *Server) updateSuite(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	if _, err := ev.GetSuite(r.Context(), subject(p), r.PathValue("suite_id")); err != nil {
		return err
	}
	var in evaluation.SuiteInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	su, err := ev.UpdateSuite(r.Context(), subject(p), r.PathValue("suite_id"), in)
	if err != nil {
		return err
	}
	writeData(w, su)
	return nil
}

func (s *Server) deleteSuite(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return nil, ev.DeleteSuite(r.Context(), subject(p), r.PathValue("suite_id"))
	})
}

// startSuiteRun starts a run ({name?}) → {run_id}.
func (s *Server) startSuiteRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in evaluation.SuiteRunInput
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
			return err
		}
	}
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		id, err := ev.StartSuiteRun(r.Context(), subject(p), r.PathValue("suite_id"), in)
		return map[string]any{"run_id": id}, err
	})
}

func (s *Server) listSuiteRuns(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.SuiteRuns(r.Context(), subject(p), r.PathValue("suite_id"))
	})
}

func (s *Server) getSuiteRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.GetSuiteRun(r.Context(), subject(p), r.PathValue("suite_id"), r.PathValue("run_id"))
	})
}
