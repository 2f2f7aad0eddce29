package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/modelprovider"
)

// Model providers (/api/system/model-providers, the original's
// model_provider_router): answers are {"success": true, "data": …} as the
// original's. Use cases in shared/modelprovider.

var errNoProviders = failure.New(failure.KindUnavailable, "model_providers_unavailable", "model providers are not configured in this deployment")

func (s *Server) providers() (*modelprovider.Store, error) {
	if s.d.Providers == nil {
		return nil, errNoProviders
	}
	return s.d.Providers, nil
}

// withProviders answers {"success": true, "data": …} with what call returns
// from the store (503 when the deployment has no providers store).
func (s *Server) withProviders(w http.ResponseWriter, call func(*modelprovider.Store) (any, error)) error {
	ps, err := s.providers()
	if err != nil {
		return err
	}
	data, err := call(ps)
	if err != nil {
		return err
	}
	writeSuccess(w, data)
	return nil
}

func (s *Server) listProviders(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withProviders(w, func(ps *modelprovider.Store) (any, error) { return ps.List(r.Context()) })
}

func (s *Server) createProvider(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.withProviders(w, func(ps *modelprovider.Store) (any, error) {
		var in modelprovider.Input
		if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
			return nil, err
		}
		v, err := ps.Create(r.Context(), p.Username, in)
		if err == nil {
			s.log.Info("model provider created", "provider_id", v.ProviderID, "user_id", p.UserID)
		}
		return v, err
	})
}

func (s *Server) getProvider(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withProviders(w, func(ps *modelprovider.Store) (any, error) { return ps.Get(r.Context(), r.PathValue("provider_id")) })
}

func (s *Server) updateProvider(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.withProviders(w, func(ps *modelprovider.Store) (any, error) {
		var in modelprovider.Input
		if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
			return nil, err
		}
		v, err := ps.Update(r.Context(), p.Username, r.PathValue("provider_id"), in)
		if err == nil {
			s.log.Info("model provider updated", "provider_id", v.ProviderID, "user_id", p.UserID)
		}
		return v, err
	})
}

func (s *Server) deleteProvider(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ps, err := s.providers()
	if err != nil {
		return err
	}
	if err := ps.Delete(r.Context(), r.PathValue("provider_id")); err != nil {
		return err
	}
	s.log.Info("model provider deleted", "provider_id", r.PathValue("provider_id"), "user_id", p.UserID)
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) remoteModels(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withProviders(w, func(ps *modelprovider.Store) (any, error) {
		return ps.RemoteModels(r.Context(), r.PathValue("provider_id"))
	})
}

func (s *Server) refreshModelCache(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	ps, err := s.providers()
	if err != nil {
		return err
	}
	n, err := ps.Refresh(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "缓存已刷新", "model_count": n})
	return nil
}

func (s *Server) modelsV2(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withProviders(w, func(ps *modelprovider.Store) (any, error) {
		return ps.Grouped(r.Context(), r.URL.Query().Get("model_type"))
	})
}

// modelStatus answers 200 with status error/unavailable/available, as the
// original does, whatever the model answered (a missing spec is an error
// status too).
func (s *Server) modelStatus(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	ps, err := s.providers()
	if err != nil {
		return err
	}
	spec := r.URL.Query().Get("spec")
	st := modelprovider.Status{Spec: spec, Status: "error", Message: "spec is required"}
	if spec != "" {
		st = ps.CheckStatus(r.Context(), spec)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": st.Status != "error", "data": st})
	return nil
}
