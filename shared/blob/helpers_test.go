package blob_test

import (
	"io"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/blob"
)

func put(t *testing.T, s blob.Store, key, content, ct string) blob.Info {
	t.Helper()
	info, err := s.Put(t.Context(), key, strings.NewReader(content), int64(len(content)), ct)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

func get(t *testing.T, s blob.Store, key string) (string, blob.Info) {
	t.Helper()
	rc, info, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b), info
}

func keysOf(list []blob.Info) []string {
	keys := make([]string, len(list))
	for i, in := range list {
		keys[i] = in.Key
	}
	return keys
}
