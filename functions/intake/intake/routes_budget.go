package intake

import (
	"encoding/json"
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/budget"
)

// budgetRoutes: token budgets (shared/budget), beyond the original. A
// budget limits the model tokens of one user (scope "user", subject = uid)
// or one agent (scope "agent", subject = slug) across all their runs; it is
// checked before each model call. Budgets are instance-wide: the superadmin
// sets them.
func (s *Server) budgetRoutes() []Route {
	return []Route{
		{"GET", "/api/system/token-budgets", SuperAdmin, Superadmin, s.listBudgets},
		{"PUT", "/api/system/token-budgets", SuperAdmin, Superadmin, s.setBudget},
	}
}

func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	bs, err := s.d.Budgets.List(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"budgets": bs})
	return nil
}

func (s *Server) setBudget(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in budget.Update
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	b, err := s.d.Budgets.Set(r.Context(), p.UID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"budget": b})
	return nil
}

// withBudget answers /api/auth/me with the caller's own token budget
// (token_budget: limit, used, remaining; null when none is set).
func (s *Server) withBudget(w http.ResponseWriter, r *http.Request, p auth.Principal, me any) error {
	b, err := s.d.Budgets.Get(r.Context(), budget.ScopeUser, p.UID)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(me)
	if err != nil {
		return err
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	out["token_budget"] = b
	writeJSON(w, http.StatusOK, out)
	return nil
}
