package chunk_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

// split runs chunk.Split and checks the invariants every preset keeps.
func split(t *testing.T, preset, md string, cfg chunk.Config, opts chunk.Options) []chunk.Chunk {
	t.Helper()
	cs, err := chunk.Split(context.Background(), preset, md, cfg, opts)
	if err != nil {
		t.Fatalf("Split(%s): %v", preset, err)
	}
	checkInvariants(t, md, cs)
	return cs
}

func checkInvariants(t *testing.T, md string, cs []chunk.Chunk) {
	t.Helper()
	for i, c := range cs {
		if c.Index != i {
			t.Errorf("chunk %d has Index %d", i, c.Index)
		}
		if c.Content == "" || c.Content != strings.TrimSpace(c.Content) {
			t.Errorf("chunk %d content not trimmed or empty: %q", i, c.Content)
		}
		if c.TokenCount != chunk.CountTokens(c.Content) {
			t.Errorf("chunk %d TokenCount %d, want %d", i, c.TokenCount, chunk.CountTokens(c.Content))
		}
		sum := sha256.Sum256([]byte(c.Content))
		if c.ContentHash != hex.EncodeToString(sum[:]) {
			t.Errorf("chunk %d ContentHash is not sha256(Content)", i)
		}
		if c.StartChar == -1 && c.EndChar == -1 {
			continue
		}
		if c.StartChar < 0 || c.StartChar >= c.EndChar || c.EndChar > len(md) {
			t.Errorf("chunk %d span [%d,%d) outside the input (%d bytes)", i, c.StartChar, c.EndChar, len(md))
		}
	}
}

// maxTokens fails when a chunk is over limit.
func maxTokens(t *testing.T, cs []chunk.Chunk, limit int) {
	t.Helper()
	for _, c := range cs {
		if c.TokenCount > limit {
			t.Errorf("chunk %d has %d tokens, limit %d:\n%s", c.Index, c.TokenCount, limit, c.Content)
		}
	}
}

func contents(cs []chunk.Chunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Content
	}
	return out
}

func cfgN(n int) chunk.Config {
	c := chunk.DefaultConfig()
	c.ChunkTokenNum = n
	return c
}

// source is the input text a chunk was located at.
func source(md string, c chunk.Chunk) string {
	if c.StartChar < 0 {
		return ""
	}
	return md[c.StartChar:c.EndChar]
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// words returns n distinct words w<from>…w<from+n-1> joined by spaces.
func words(prefix string, from, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = prefix + itoa(from+i)
	}
	return strings.Join(ws, " ")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
