package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// errNotFound and errExists are the API server's 404 and 409.
var (
	errNotFound = errors.New("kubernetes: not found")
	errExists   = errors.New("kubernetes: already exists")
)

// InClusterConfig fills the API server address, token file and CA from a
// pod's service account (the provisioner running in the cluster). getenv
// is the caller's (main's) environment lookup.
func InClusterConfig(getenv func(string) string) (Config, error) {
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount/"
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, errors.New("not running in a cluster: KUBERNETES_SERVICE_HOST/PORT unset")
	}
	ca, err := os.ReadFile(dir + "ca.crt")
	if err != nil {
		return Config{}, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return Config{}, errors.New("service account ca.crt holds no certificate")
	}
	ns, _ := os.ReadFile(dir + "namespace")
	return Config{
		APIServer: "https://" + net.JoinHostPort(host, port),
		TokenFile: dir + "token",
		Namespace: strings.TrimSpace(string(ns)),
		HTTPClient: &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}},
	}, nil
}

// apiClient is the handful of REST calls the backend makes.
type apiClient struct {
	base      string
	http      *http.Client
	token     string
	tokenFile string

	mu       sync.Mutex
	cached   string
	cachedAt time.Time
}

func (c *apiClient) bearer() (string, error) {
	if c.tokenFile == "" {
		return c.token, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Projected service-account tokens rotate: re-read the file each minute.
	if c.cached == "" || time.Since(c.cachedAt) > time.Minute {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return "", fmt.Errorf("kubernetes token: %w", err)
		}
		c.cached, c.cachedAt = strings.TrimSpace(string(b)), time.Now()
	}
	return c.cached, nil
}

func (c *apiClient) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	tok, err := c.bearer()
	if err != nil {
		return err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("kubernetes %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var st struct {
			Message string `json:"message"`
			Reason  string `json:"reason"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = json.Unmarshal(raw, &st)
		kind := errors.New("kubernetes: api error")
		switch resp.StatusCode {
		case http.StatusNotFound:
			kind = errNotFound
		case http.StatusConflict:
			kind = errExists
		}
		return fmt.Errorf("kubernetes %s %s: %d %s %s: %w", method, path, resp.StatusCode, st.Reason, st.Message, kind)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
