package main

// Copied from tests/bench (a package main there, so not importable); keep the two in step.

import (
	"fmt"
	"io"
	"strings"
)

// report prints the figures in the order they are added, each result line as
// `name: value (ratio vs floor)` followed by its target verdict, and ends
// with a summary of every target.
type report struct {
	w       io.Writer
	verdict []verdict
	failed  []string
}

type verdict struct {
	name, target string
	met          bool
}

// section starts a figure: a blank line, its title and what it compares.
func (r *report) section(title, how string) {
	fmt.Fprintf(r.w, "\n%s\n", title)
	if how != "" {
		fmt.Fprintf(r.w, "  # %s\n", how)
	}
}

// line prints `name: value (vsFloor)`; when target is not empty it appends
// `— target <target>: met|missed` and records the verdict for the summary.
func (r *report) line(name, value, vsFloor, target string, met bool) {
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

// detail prints an indented supporting line.
func (r *report) detail(format string, args ...any) {
	fmt.Fprintf(r.w, "  "+format+"\n", args...)
}

// fail records that a figure could not be measured.
func (r *report) fail(figure string, err error) {
	fmt.Fprintf(r.w, "ERROR: %s could not run: %v\n", figure, err)
	r.failed = append(r.failed, figure)
}

// summary prints every target's verdict.
func (r *report) summary() {
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
