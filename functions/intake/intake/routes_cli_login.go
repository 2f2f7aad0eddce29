package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

// CLI device login: the CLI creates a session, the signed-in browser reads
// and approves it by its user code, the CLI exchanges its device code for
// an API key, once, within 10 minutes.

func (s *Server) createCLISession(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var in struct {
		KeyName *string `json:"key_name"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
			return err
		}
	}
	out, err := s.d.Auth.CreateCLISessionFrom(r.Context(), in.KeyName, s.d.ClientAddr.Addr(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getCLISession(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	out, err := s.d.Auth.GetCLISession(r.Context(), p, r.PathValue("user_code"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) approveCLISession(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	out, err := s.d.Auth.ApproveCLISession(r.Context(), p, r.PathValue("user_code"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_code": out.UserCode, "status": out.Status, "approved_at": out.ApprovedAt})
	return nil
}

func (s *Server) exchangeCLISession(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var in struct {
		DeviceCode string `json:"device_code"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.d.Auth.ExchangeCLISession(r.Context(), in.DeviceCode)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
