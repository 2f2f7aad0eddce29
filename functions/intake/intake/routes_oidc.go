package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/oidc"
)

// OIDC login (public routes): the login page asks whether SSO is on and
// for an authorization URL; the provider sends the browser to the callback,
// which redirects to the web app with a one-time code; the web app trades
// the code for a token.

func (s *Server) oidcConfig(w http.ResponseWriter, _ *http.Request, _ auth.Principal) error {
	writeJSON(w, http.StatusOK, s.d.OIDC.PublicConfig())
	return nil
}

func (s *Server) oidcLoginURL(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	u, err := s.d.OIDC.LoginURL(r.Context(), r.URL.Query().Get("redirect_path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"login_url": u})
	return nil
}

// oidcCallback always redirects (a GET, so following it replays nothing):
// to the web app's callback page with a code, or to its login page with
// an error.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	q := r.URL.Query()
	to := oidc.FrontendLoginPath + "?oidc_error=OIDC+login+is+not+available"
	if s.d.OIDC != nil {
		to = s.d.OIDC.Callback(r.Context(), q.Get("code"), q.Get("state"), q.Get("error"))
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
	return nil
}

func (s *Server) oidcExchangeCode(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var in struct {
		Code string `json:"code"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	tok, err := s.d.OIDC.ExchangeCode(r.Context(), in.Code)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tok)
	return nil
}
