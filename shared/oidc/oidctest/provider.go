// Package oidctest is a small OpenID Connect provider for tests: discovery,
// JWKS, an authorization endpoint that approves at once, a token endpoint
// issuing RS256-signed ID tokens, and userinfo. Tests shape the next ID
// token (wrong audience, wrong nonce, expired) to prove the client refuses it.
//
// Imported by: the tests of shared/oidc and functions/intake/intake.
// May import: go-jose, the standard library.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Person is who signs in at the provider.
type Person struct {
	Subject string
	Claims  map[string]any // extra claims (preferred_username, name, department, …)
}

// Tamper changes the next ID token (nil fields: as they should be).
type Tamper struct {
	Audience  string        // another audience
	Nonce     string        // another nonce
	ExpiresIn time.Duration // negative: already expired
	Issuer    string        // another issuer
	Resign    bool          // sign with a key the JWKS does not hold
}

// Provider is a running test provider.
type Provider struct {
	URL          string
	ClientID     string
	ClientSecret string

	srv   *httptest.Server
	key   *rsa.PrivateKey
	other *rsa.PrivateKey

	mu     sync.Mutex
	person Person
	tamper Tamper
	codes  map[string]grant
	access map[string]Person
	Tokens int // ID tokens issued
}

type grant struct {
	person Person
	nonce  string
}

// Start runs a provider until the test ends.
func Start(t testing.TB, clientID, clientSecret string) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{ClientID: clientID, ClientSecret: clientSecret, key: key, other: other,
		codes: map[string]grant{}, access: map[string]Person{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("GET /userinfo", p.userinfo)
	p.srv = httptest.NewServer(mux)
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// SignIn sets who the authorization endpoint signs in next.
func (p *Provider) SignIn(person Person) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.person = person
}

// TamperNext shapes the ID tokens issued from now on.
func (p *Provider) TamperNext(t Tamper) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = t
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer": p.URL, "authorization_endpoint": p.URL + "/authorize", "token_endpoint": p.URL + "/token",
		"userinfo_endpoint": p.URL + "/userinfo", "jwks_uri": p.URL + "/jwks",
		"id_token_signing_alg_values_supported": []string{"RS256"}, "response_types_supported": []string{"code"},
		"subject_types_supported": []string{"public"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
}

func randHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// authorize approves at once: it redirects to redirect_uri with a code and
// the state, as a provider does after the person signs in.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("response_type") != "code" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := randHex()
	p.mu.Lock()
	p.codes[code] = grant{person: p.person, nonce: q.Get("nonce")}
	p.mu.Unlock()
	u, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		w.WriteHeader(http.StatusUnauthorized)
		writeJSON(w, map[string]string{"error": "invalid_client"})
		return
	}
	p.mu.Lock()
	g, found := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	tm := p.tamper
	p.mu.Unlock()
	if !found {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": "invalid_grant"})
		return
	}
	now := time.Now()
	exp := now.Add(5 * time.Minute)
	if tm.ExpiresIn != 0 {
		exp = now.Add(tm.ExpiresIn)
	}
	claims := map[string]any{"iss": p.URL, "sub": g.person.Subject, "aud": p.ClientID, "iat": now.Add(-time.Minute).Unix(),
		"exp": exp.Unix(), "nonce": g.nonce}
	if tm.Audience != "" {
		claims["aud"] = tm.Audience
	}
	if tm.Nonce != "" {
		claims["nonce"] = tm.Nonce
	}
	if tm.Issuer != "" {
		claims["iss"] = tm.Issuer
	}
	for k, v := range g.person.Claims {
		claims[k] = v
	}
	key := p.key
	if tm.Resign {
		key = p.other
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("JWT"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	idToken, _ := jws.CompactSerialize()
	access := randHex()
	p.mu.Lock()
	p.access[access] = g.person
	p.Tokens++
	p.mu.Unlock()
	writeJSON(w, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
}

func (p *Provider) userinfo(w http.ResponseWriter, r *http.Request) {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	p.mu.Lock()
	person, ok := p.access[h[min(len(prefix), len(h)):]]
	p.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	out := map[string]any{"sub": person.Subject}
	for k, v := range person.Claims {
		out[k] = v
	}
	writeJSON(w, out)
}

// Authorize follows a login URL the way a browser would, up to the
// redirect back to the client, and returns that callback URL's query.
func (p *Provider) Authorize(t testing.TB, loginURL string) url.Values {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(loginURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}
