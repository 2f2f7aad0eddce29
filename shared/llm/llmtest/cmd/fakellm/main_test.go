package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServesTheScript(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-addr", "127.0.0.1:0", "-script", "testdata/example.json"}, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	res, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), `"content":"Hel"`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("status %d body %s", res.StatusCode, b)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("run after shutdown: %v", err)
	}
}

func TestRejectsBadScript(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"-script", "testdata/missing.json"}, nil)
	if err == nil {
		t.Fatal("missing script accepted")
	}
}
