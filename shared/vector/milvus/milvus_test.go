package milvus_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/vector"
	"github.com/yuxi-serverless/yuxi/shared/vector/milvus"
	"github.com/yuxi-serverless/yuxi/shared/vector/vectortest"
)

// TestMilvusContract runs the vector.Store contract against a real Milvus
// when MILVUS_ADDR is set (e.g. 127.0.0.1:19530; MILVUS_TOKEN for auth).
// There is no Milvus in CI, so it is skipped there too, visibly.
func TestMilvusContract(t *testing.T) {
	addr := os.Getenv("MILVUS_ADDR")
	if addr == "" {
		t.Skip("MILVUS_ADDR not set: the Milvus engine's contract runs only against a real Milvus server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := milvus.New(ctx, milvus.Config{Address: addr, APIKey: os.Getenv("MILVUS_TOKEN"), CollectionPrefix: "yuxi_test_"})
	if err != nil {
		t.Fatalf("connect to Milvus at %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	t.Log(s.Describe())
	vectortest.Run(t, func(t *testing.T) vector.Store { return s })
}

// TestMilvusContractFake runs the contract against the engine talking to an
// in-memory fake of the Milvus service (fake_test.go): it exercises the
// engine's requests and its handling of Milvus' statuses where no server runs.
func TestMilvusContractFake(t *testing.T) {
	addr, _ := startFakeMilvus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := milvus.New(ctx, milvus.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	vectortest.Run(t, func(t *testing.T) vector.Store { return s })
}

// TestMilvusReloadsReleasedCollection: a collection released by someone
// else is loaded again on the next search.
func TestMilvusReloadsReleasedCollection(t *testing.T) {
	addr, fake := startFakeMilvus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := milvus.New(ctx, milvus.Config{Address: addr, CollectionPrefix: "p_"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	name := vectortest.Name(t)
	if err := s.EnsureCollection(ctx, name, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, name, []vector.Item{{ID: "a", Group: "f", Vector: []float32{1, 0}}}); err != nil {
		t.Fatal(err)
	}
	fake.release(milvus.CollectionName("p_", name))
	hits, err := s.Search(ctx, name, []float32{1, 0}, 1, nil)
	if err != nil || len(hits) != 1 || hits[0].ID != "a" {
		t.Fatalf("search after release: %v %v", hits, err)
	}
}

var valid = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)

func TestCollectionName(t *testing.T) {
	cases := map[string]string{
		"kb_3f2a9c":              "kb_3f2a9c", // knowledge-base ids are kept
		"KB_Upper_1":             "KB_Upper_1",
		"kb-3f2a":                "",
		"3f2a":                   "",
		"kb.3f2a/x":              "",
		"知识库":                    "",
		strings.Repeat("a", 300): "",
	}
	seen := map[string]string{}
	for in, want := range cases {
		got := milvus.CollectionName("", in)
		if !valid.MatchString(got) {
			t.Errorf("CollectionName(%q) = %q: not a valid Milvus name", in, got)
		}
		if want != "" && got != want {
			t.Errorf("CollectionName(%q) = %q, want %q", in, got, want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q both map to %q", in, other, got)
		}
		seen[got] = in
	}
	// Names that differ only in invalid characters stay apart.
	if milvus.CollectionName("", "kb-1") == milvus.CollectionName("", "kb.1") {
		t.Error("kb-1 and kb.1 collide")
	}
	if got := milvus.CollectionName("yuxi_", "kb_1"); got != "yuxi_kb_1" {
		t.Errorf("with prefix: %q", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []milvus.Config{
		{},
		{Address: "127.0.0.1:1", Index: "DISKANN"},
		{Address: "127.0.0.1:1", Consistency: "eventually"},
	} {
		if _, err := milvus.New(ctx, cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
