package runstream

import "testing"

func TestNormalizeCursor(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                "0-0",
		"0-0":             "0-0",
		"1718000000000-3": "1718000000000-3",
		" 12-0 ":          "12-0",
		"12":              "0-0",
		"12-":             "0-0",
		"-1":              "0-0",
		"a-b":             "0-0",
		"$":               "0-0",
		"12-3-4":          "0-0",
		"007-01":          "7-1",
	}
	for in, want := range cases {
		if got := NormalizeCursor(in); got != want {
			t.Errorf("NormalizeCursor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStreamIDOrderIsNumeric(t *testing.T) {
	t.Parallel()
	a, _ := parseID("9-5")
	b, _ := parseID("10-0")
	c, _ := parseID("10-1")
	if !a.less(b) || !b.less(c) || c.less(a) || a.less(a) {
		t.Fatalf("ids must compare numerically: %v %v %v", a, b, c)
	}
}
