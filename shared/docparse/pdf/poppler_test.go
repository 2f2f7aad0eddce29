package pdf

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Cross-checks against poppler's pdftotext, when it is installed (Debian:
// poppler-utils). Skipped otherwise: the unit tests above do not depend on it.

func pdftotext(t *testing.T, data []byte, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext not installed")
	}
	in := filepath.Join(t.TempDir(), "in.pdf")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, append(append(args, "-q"), in, "-")...).Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return string(out)
}

func TestPdftotextAgreesOnTwoColumns(t *testing.T) {
	t.Parallel()
	// Without the paragraph gap in the left column: pdftotext orders the
	// blocks of the gapped variant left-top, right, left-bottom.
	data := buildPDF(t, []page{twoColumns(false)}, pdfOptions{compress: true})
	ours := strings.Fields(strings.ReplaceAll(extract(t, data).Pages[0], "example", "exam- ple"))

	// pdftotext's reading order mode reads the columns as we do.
	if theirs := strings.Fields(pdftotext(t, data)); !slices.Equal(ours, theirs) {
		t.Errorf("word order differs from pdftotext:\nours:   %q\ntheirs: %q", ours, theirs)
	}

	// -layout keeps the physical layout: both columns side by side on each
	// line. Cut each line at the gutter (a run of 3+ spaces after the left
	// column) and read the left parts, then the right parts.
	var title, left, right, footer []string
	gap := regexp.MustCompile(`\S( {3,})\S`)
	for _, l := range strings.Split(pdftotext(t, data, "-layout"), "\n") {
		switch trimmed := strings.TrimSpace(l); {
		case trimmed == "":
		case strings.HasPrefix(trimmed, "Reading Order"):
			title = strings.Fields(trimmed)
		case strings.HasPrefix(trimmed, "Page"):
			footer = strings.Fields(trimmed)
		default:
			if m := gap.FindStringSubmatchIndex(l); m != nil {
				left = append(left, strings.Fields(l[:m[2]])...)
				right = append(right, strings.Fields(l[m[3]:])...)
			} else if len(l)-len(strings.TrimLeft(l, " ")) > 20 {
				right = append(right, strings.Fields(l)...)
			} else {
				left = append(left, strings.Fields(l)...)
			}
		}
	}
	layout := slices.Concat(title, left, right, footer)
	if !slices.Equal(ours, layout) {
		t.Errorf("word order differs from pdftotext -layout read column by column:\nours:   %q\ntheirs: %q", ours, layout)
	}
}

func TestPdftotextAgreesOnCJKAndLigatures(t *testing.T) {
	t.Parallel()
	data := buildPDF(t, []page{{runs: []run{
		{x: 72, y: 700, size: 12, text: "中文文本提取", cjk: true},
		{x: 72, y: 680, size: 12, text: "The \ufb01rst \ufb02ow."},
	}}}, pdfOptions{})
	ours := strings.Fields(extract(t, data).Pages[0])
	theirs := strings.Fields(pdftotext(t, data))
	if !slices.Equal(ours, theirs) {
		t.Errorf("ours %q, pdftotext %q", ours, theirs)
	}
}
