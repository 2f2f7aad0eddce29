package benchkit

import (
	"fmt"
	"io"
	"strings"
)

// Report prints the figures in the order they are added, each result line as
// `name: value (ratio vs floor)` followed by its target verdict, and ends
// with a summary of every target.
type Report struct {
	w       io.Writer
	verdict []verdict
	failed  []string
}

type verdict struct {
	name, target string
	met          bool
}

// NewReport returns a report printing to w.
func NewReport(w io.Writer) *Report { return &Report{w: w} }

// Section starts a figure: a blank line, its title and what it compares.
func (r *Report) Section(title, how string) {
	fmt.Fprintf(r.w, "\n%s\n", title)
	if how != "" {
		fmt.Fprintf(r.w, "  # %s\n", how)
	}
}

// Line prints `name: value (vsFloor)`; when target is not empty it appends
// `— target <target>: met|missed` and records the verdict for the summary.
func (r *Report) Line(name, value, vsFloor, target string, met bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", name, value)
	if vsFloor != "" {
		fmt.Fprintf(&b, " (%s)", vsFloor)
	}
	if target != "" {
		fmt.Fprintf(&b, " — target %s: %s", target, metWord(met))
		r.verdict = append(r.verdict, verdict{name: name, target: target, met: met})
	}
	fmt.Fprintln(r.w, b.String())
}

// Detail prints an indented supporting line.
func (r *Report) Detail(format string, args ...any) {
	fmt.Fprintf(r.w, "  "+format+"\n", args...)
}

// Fail records that a figure could not be measured.
func (r *Report) Fail(figure string, err error) {
	fmt.Fprintf(r.w, "ERROR: %s could not run: %v\n", figure, err)
	r.failed = append(r.failed, figure)
}

// Failed names the figures that could not be measured.
func (r *Report) Failed() []string { return r.failed }

// Summary prints every target's verdict.
func (r *Report) Summary() {
	fmt.Fprintf(r.w, "\nsummary\n")
	met := 0
	for _, v := range r.verdict {
		if v.met {
			met++
		}
		fmt.Fprintf(r.w, "  %-7s %s (target %s)\n", metWord(v.met), v.name, v.target)
	}
	fmt.Fprintf(r.w, "  %d of %d targets met", met, len(r.verdict))
	if len(r.failed) > 0 {
		fmt.Fprintf(r.w, "; could not run: %s", strings.Join(r.failed, ", "))
	}
	fmt.Fprintln(r.w)
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
