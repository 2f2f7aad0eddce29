package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// `yuxi chat` serves a local chat page on 127.0.0.1 that talks to an agent
// of the current remote through this process, as the original's CLI does:
// the page calls the local server, which adds the stored API key and
// forwards to the platform's channel route and run event streams. The key
// never reaches the browser.
//
// The local server answers only requests that carry the page's token (a
// random value printed in the address, embedded in the page and sent back
// as a header or, for event streams, a query parameter) and name
// 127.0.0.1/localhost as their Host, so other web sites open in the same
// browser cannot use it (cross-site requests cannot read the token; DNS
// rebinding fails the Host check).

//go:embed chatpage.html
var chatPage string

var chatTmpl = template.Must(template.New("chat").Parse(chatPage))

// chatStreamPath is the only upstream path the page may stream from.
var chatStreamPath = regexp.MustCompile(`^/api/agent/(runs|requests)/[A-Za-z0-9_.:-]{1,128}/events$`)

// chatIDPattern bounds the page's session ids (the channel's chat_id).
var chatIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

const chatChannel, chatAccount = "cli", "yuxi-chat"

func (a *app) chat(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	slug := fs.String("agent-slug", "default-chatbot", "the agent to talk to")
	noOpen := fs.Bool("no-open", false, "print the address, do not open a browser")
	port := fs.Int("port", 0, "local port (0: any free port)")
	if err := fs.Parse(args); err != nil {
		return usagef("chat: %v", err)
	}
	if fs.NArg() > 0 || *port < 0 || *port > 65535 || strings.TrimSpace(*slug) == "" {
		return usagef("chat [--agent-slug SLUG] [--no-open] [--port N]")
	}
	name, r, err := a.current()
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if _, err := c.me(ctx); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	token, err := randomHex(24)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	p := &chatProxy{c: c, slug: *slug, remote: name, remoteURL: r.URL, token: token,
		port:   strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
		stream: &http.Client{Transport: c.hc.Transport}}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	link := "http://127.0.0.1:" + p.port + "/?t=" + token
	if err := a.out(map[string]any{"url": link, "agent_slug": *slug, "remote": name}, func(w io.Writer) {
		fmt.Fprintf(w, "chat with %s on %s at %s\n(press Ctrl-C to stop)\n", *slug, name, link)
	}); err != nil {
		ln.Close()
		return err
	}
	if !*noOpen {
		openBrowser(link)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		return fmt.Errorf("chat: %w", err)
	}
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// chatProxy is the local server behind the page.
type chatProxy struct {
	c         *client
	stream    *http.Client // no overall timeout: event streams last
	slug      string
	remote    string
	remoteURL string
	token     string
	port      string
}

func (p *chatProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	host := r.Host
	if host != "127.0.0.1:"+p.port && host != "localhost:"+p.port {
		chatError(w, http.StatusForbidden, "bad_host", "this server answers only 127.0.0.1:"+p.port)
		return
	}
	given := r.Header.Get("X-Yuxi-Chat-Token")
	if given == "" {
		given = r.URL.Query().Get("t")
	}
	if subtle.ConstantTimeCompare([]byte(given), []byte(p.token)) != 1 {
		chatError(w, http.StatusForbidden, "bad_token", "open the address `yuxi chat` printed")
		return
	}
	switch {
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
		_ = chatTmpl.Execute(w, map[string]string{"Token": p.token, "Agent": p.slug, "Remote": p.remote + " (" + p.remoteURL + ")"})
	case r.URL.Path == "/api/send" && r.Method == http.MethodPost:
		p.send(w, r)
	case chatStreamPath.MatchString(r.URL.Path) && r.Method == http.MethodGet:
		p.proxyStream(w, r)
	default:
		chatError(w, http.StatusNotFound, "not_found", "no such local route")
	}
}

// send forwards one message of the page to the channel route.
func (p *chatProxy) send(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Yuxi-Chat-Token") == "" { // a header: only the page's own script can send it
		chatError(w, http.StatusForbidden, "bad_token", "send the token as X-Yuxi-Chat-Token")
		return
	}
	var in struct {
		ChatID string `json:"chat_id"`
		Text   string `json:"text"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		chatError(w, http.StatusBadRequest, "invalid_json", "the body must be {chat_id, text}")
		return
	}
	if !chatIDPattern.MatchString(in.ChatID) {
		chatError(w, http.StatusUnprocessableEntity, "invalid_chat_id", "chat_id must be 1–64 letters, digits, - or _")
		return
	}
	body := map[string]any{"channel": chatChannel, "account_id": chatAccount, "chat_id": in.ChatID,
		"agent_slug": p.slug, "message": map[string]any{"type": "text", "text": in.Text}}
	var out json.RawMessage
	err := p.c.postJSON(r.Context(), "/api/agent-invocation/channel/messages", body, &out)
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		chatError(w, ae.Status, ae.Code, ae.Message)
	case err != nil:
		chatError(w, http.StatusBadGateway, "remote_unreachable", err.Error())
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}
}

// proxyStream relays a run's or a request's event stream, resuming after
// Last-Event-ID as the platform does.
func (p *chatProxy) proxyStream(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, p.c.base+r.URL.Path, nil)
	if err != nil {
		chatError(w, http.StatusBadRequest, "bad_path", err.Error())
		return
	}
	req.Header.Set("Authorization", "Bearer "+p.c.key)
	req.Header.Set("Accept", "text/event-stream")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		req.Header.Set("Last-Event-ID", id)
	}
	resp, err := p.stream.Do(req)
	if err != nil {
		chatError(w, http.StatusBadGateway, "remote_unreachable", err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		chatError(w, resp.StatusCode, "stream_refused", strings.TrimSpace(string(b)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func chatError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
