package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// APIKey creates an API key for the client's user and returns its secret.
func (c *Client) APIKey(name string) string {
	c.T.Helper()
	out := c.OK("POST", "/api/user/apikey", map[string]any{"name": name, "request_id": "key-" + name + "-0001"})
	s, _ := out["secret"].(string)
	if s == "" {
		c.T.Fatalf("no secret in %v", out)
	}
	return s
}

// DoWith is Do with extra request headers (name, value pairs).
func (c *Client) DoWith(method, path string, body any, header ...string) Response {
	c.T.Helper()
	j, err := json.Marshal(body)
	if err != nil {
		c.T.Fatal(err)
	}
	req, err := http.NewRequest(method, c.Base+path, bytes.NewReader(j))
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http().Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// DataLines returns the `data:` payloads of an SSE body, in order.
func DataLines(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}
