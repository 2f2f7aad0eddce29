package contentguard_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/contentguard"
)

// naive is the reference: any keyword (folded) is a substring of the text.
func naive(kws []string, text string) bool {
	t := strings.ToLower(text)
	for _, k := range kws {
		if k = strings.TrimSpace(k); k != "" && strings.Contains(t, strings.ToLower(k)) {
			return true
		}
	}
	return false
}

func TestMatcherAgreesWithNaive(t *testing.T) {
	t.Parallel()
	kws := []string{"he", "she", "his", "hers", "炸弹", "制作炸药", "Bomb", "  ", ""}
	m := contentguard.NewMatcher(kws)
	for _, text := range []string{"", "ushers", "h", "hi s", "如何制作炸", "如何制作炸药？", "a BOMB!", "xyz", "炸", "弹炸"} {
		got := m.Match(text) >= 0
		if got != naive(kws, text) {
			t.Errorf("%q: got %v", text, got)
		}
		if got {
			if i := m.Match(text); !strings.Contains(strings.ToLower(text), strings.ToLower(kws[i])) {
				t.Errorf("%q: reported keyword %q is not in it", text, kws[i])
			}
		}
	}
	if contentguard.NewMatcher(nil).Match("anything") != -1 {
		t.Error("empty matcher matched")
	}
}

// A keyword split across streamed chunks — even inside a UTF-8 sequence — is found.
func TestStreamFindsSplitKeywords(t *testing.T) {
	t.Parallel()
	m := contentguard.NewMatcher([]string{"制作炸药", "secret"})
	text := "好的，下面是制作炸药的方法"
	b := []byte(text)
	for cut := 1; cut < len(b); cut++ {
		s := m.NewStream()
		hit := s.Write(string(b[:cut])) >= 0 || s.Write(string(b[cut:])) >= 0
		if !hit {
			t.Fatalf("cut at byte %d: not found", cut)
		}
	}
	s := m.NewStream()
	for _, c := range []string{"the se", "cr", "et is"} {
		if s.Write(c) >= 0 {
			return
		}
	}
	t.Fatal("secret split in three chunks not found")
}

func TestLargeListAgreesWithNaive(t *testing.T) {
	t.Parallel()
	kws := make([]string, 10000)
	for i := range kws {
		kws[i] = fmt.Sprintf("kw%05dx", i)
	}
	m := contentguard.NewMatcher(kws)
	if m.Match("nothing here kw1234 kw01234") != -1 {
		t.Fatal("false positive")
	}
	if i := m.Match("prefix KW09999X suffix"); i != 9999 {
		t.Fatalf("got %d", i)
	}
}
