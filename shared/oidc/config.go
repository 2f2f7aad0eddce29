package oidc

import (
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

// LoadConfig reads the original's OIDC_* variables from an environment
// list (KEY=VALUE, as os.Environ returns it; main passes its own).
func LoadConfig(environ []string) (Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "OIDC_") {
			env[k] = strings.TrimSpace(v)
		}
	}
	get := func(k, def string) string {
		if v, ok := env[k]; ok && v != "" {
			return v
		}
		return def
	}
	flag := func(k string, def bool) bool {
		v := strings.ToLower(get(k, ""))
		if v == "" {
			return def
		}
		return v == "true" || v == "1" || v == "yes"
	}
	c := Config{
		Enabled:               flag("OIDC_ENABLED", false),
		ProviderName:          get("OIDC_PROVIDER_NAME", "OIDC"),
		IssuerURL:             get("OIDC_ISSUER_URL", ""),
		ClientID:              get("OIDC_CLIENT_ID", ""),
		ClientSecret:          get("OIDC_CLIENT_SECRET", ""),
		RedirectURI:           get("OIDC_REDIRECT_URI", DefaultCallbackPath),
		AuthorizationEndpoint: get("OIDC_AUTHORIZATION_ENDPOINT", ""),
		TokenEndpoint:         get("OIDC_TOKEN_ENDPOINT", ""),
		UserinfoEndpoint:      get("OIDC_USERINFO_ENDPOINT", ""),
		JWKSURI:               get("OIDC_JWKS_URI", ""),
		Scopes:                strings.Fields(get("OIDC_SCOPES", "openid profile email")),
		ForcePromptLogin:      flag("OIDC_FORCE_PROMPT_LOGIN", true),
		UsernameClaim:         get("OIDC_USERNAME_CLAIM", "preferred_username"),
		NameClaim:             get("OIDC_NAME_CLAIM", "name"),
		DepartmentClaim:       get("OIDC_DEPARTMENT_CLAIM", "department"),
		Policy: auth.ExternalPolicy{
			UseRawUsername:    flag("OIDC_USE_RAW_USERNAME", false),
			AutoCreateUser:    flag("OIDC_AUTO_CREATE_USER", true),
			DefaultRole:       get("OIDC_DEFAULT_ROLE", auth.RoleUser),
			DefaultDepartment: get("OIDC_DEFAULT_DEPARTMENT", "OIDC users"),
			FetchDepartment:   flag("OIDC_FETCH_DEPARTMENT_INFO", false),
		},
	}
	return c, c.Validate()
}
