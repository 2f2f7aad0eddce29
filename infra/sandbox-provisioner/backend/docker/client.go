package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// APIVersion is the Engine API version every request names. 1.41 is what
// Debian bookworm's docker.io (20.10) speaks; newer engines accept it too.
const APIVersion = "1.41"

// ErrNotFound is returned for an Engine 404 (no such container, exec, network).
var ErrNotFound = errors.New("docker: not found")

// errConflict is an Engine 409 (name already in use).
var errConflict = errors.New("docker: conflict")

// Client speaks the few Engine API calls the backend needs over the
// daemon's socket. It holds no per-call state and is safe for concurrent use.
type Client struct {
	http *http.Client
	base string
}

// NewClient returns a client for host: "unix:///path/docker.sock", a bare
// socket path, or "tcp://host:port" (plain HTTP; for a daemon on loopback).
func NewClient(host string) (*Client, error) {
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	switch {
	case strings.HasPrefix(host, "tcp://"):
		return &Client{http: &http.Client{}, base: "http://" + strings.TrimPrefix(host, "tcp://") + "/v" + APIVersion}, nil
	case strings.HasPrefix(host, "unix://") || strings.HasPrefix(host, "/"):
		sock := strings.TrimPrefix(host, "unix://")
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
			MaxIdleConnsPerHost: 8,
		}
		return &Client{http: &http.Client{Transport: tr}, base: "http://docker/v" + APIVersion}, nil
	}
	return nil, fmt.Errorf("docker host %q: want unix://, tcp:// or a socket path", host)
}

// Ping checks the daemon answers.
func (c *Client) Ping(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/_ping", nil, nil, nil)
}

// request sends one call and returns the response when its status is 2xx or
// 304; other statuses become errors carrying the Engine's message.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("docker %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotModified {
		return resp, nil
	}
	defer resp.Body.Close()
	var msg struct {
		Message string `json:"message"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(raw, &msg)
	if msg.Message == "" {
		msg.Message = strings.TrimSpace(string(raw))
	}
	var kind error
	switch resp.StatusCode {
	case http.StatusNotFound:
		kind = ErrNotFound
	case http.StatusConflict:
		kind = errConflict
	default:
		kind = errors.New("docker: engine error")
	}
	return nil, fmt.Errorf("docker %s %s: %d %s: %w", method, path, resp.StatusCode, msg.Message, kind)
}

// do sends in as JSON (when not nil) and decodes the answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.request(ctx, method, path, q, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("docker %s %s: decode: %w", method, path, err)
	}
	return nil
}

// ImportImage creates image ref ("repo:tag") from a root file system tar
// (POST /images/create?fromSrc=-, what `docker import` does), applying
// Dockerfile instructions such as `ENTRYPOINT ["x"]` (docker import --change).
func (c *Client) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes ...string) error {
	repo, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	for _, ch := range changes {
		q.Add("changes", ch)
	}
	resp, err := c.request(ctx, http.MethodPost, "/images/create", q, rootfs, "application/x-tar")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// The answer is a JSON progress stream; an error arrives as {"error": …}.
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("docker import %s: %w", ref, err)
		}
		if m.Error != "" {
			return fmt.Errorf("docker import %s: %s", ref, m.Error)
		}
	}
}

// ImageExists reports whether ref is present in the engine.
func (c *Client) ImageExists(ctx context.Context, ref string) (bool, error) {
	err := c.do(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, nil)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// Get decodes the answer to GET path (an Engine API path such as
// "/containers/NAME/json") into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, nil, out)
}

// Delete sends DELETE path (with force) and ignores a 404.
func (c *Client) Delete(ctx context.Context, path string) error {
	err := c.do(ctx, http.MethodDelete, path, url.Values{"force": {"1"}}, nil, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
