package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// agentEval is `yuxi agent eval`: run a stored evaluation suite on the
// platform (--suite SUITE_ID: the platform runs the items, checks and
// judge; the command starts the run and follows it), or a local JSONL of
// samples (--file PATH --agent-slug SLUG: each line {input | query |
// question | prompt, expected_output?, checks?: [{type: contains | regex,
// value | pattern}]} goes through POST /api/agent-invocation/eval/runs,
// --max-concurrency at once, each bounded by --timeout-seconds). It prints
// every item's result and a summary, and exits 1 when any item failed.
func (a *app) agentEval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agent eval", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	suite := fs.String("suite", "", "a stored evaluation suite's id (suite_…)")
	file := fs.String("file", "", "a local JSONL of samples")
	slug := fs.String("agent-slug", "", "with --file: the agent to evaluate")
	conc := fs.Int("max-concurrency", 1, "with --file: samples at once (1–32)")
	timeout := fs.Int("timeout-seconds", 900, "bound of one sample (--file) or of the whole run (--suite)")
	name := fs.String("experiment-name", "", "the run's name (--suite) or the samples' experiment name (--file)")
	poll := fs.Duration("poll", time.Second, "with --suite: how often the run is read")
	if err := fs.Parse(args); err != nil {
		return usagef("agent eval: %v", err)
	}
	switch {
	case fs.NArg() > 0:
		return usagef("agent eval: unexpected argument %q", fs.Arg(0))
	case (*suite == "") == (*file == ""):
		return usagef("agent eval --suite SUITE_ID, or agent eval --file SAMPLES.jsonl --agent-slug SLUG")
	case *file != "" && *slug == "":
		return usagef("agent eval --file needs --agent-slug")
	case *conc < 1 || *conc > 32:
		return usagef("--max-concurrency must be between 1 and 32")
	case *timeout < 1:
		return usagef("--timeout-seconds must be positive")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var res evalReport
	if *suite != "" {
		res, err = a.evalSuite(ctx, c, *suite, *name, time.Duration(*timeout)*time.Second, max(*poll, 10*time.Millisecond))
	} else {
		res, err = a.evalFile(ctx, c, *file, *slug, *name, *conc, time.Duration(*timeout)*time.Second)
	}
	if err != nil {
		return err
	}
	if err := a.out(res, res.text); err != nil {
		return err
	}
	if res.Summary.Failed > 0 || (res.Status != "" && res.Status != "completed") {
		return fmt.Errorf("%d of %d items failed", res.Summary.Failed, res.Summary.Items)
	}
	return nil
}

// evalItem is one item's result as printed.
type evalItem struct {
	Index      int              `json:"item_index"`
	Input      string           `json:"input"`
	Status     string           `json:"status"`
	Passed     bool             `json:"passed"`
	Output     string           `json:"output"`
	JudgeScore *float64         `json:"judge_score,omitempty"`
	Checks     []map[string]any `json:"checks,omitempty"`
	Trajectory map[string]any   `json:"trajectory_summary,omitempty"`
	AgentRunID *string          `json:"agent_run_id,omitempty"`
	Error      string           `json:"error,omitempty"`
}

type evalSummary struct {
	Items    int      `json:"items"`
	Passed   int      `json:"passed"`
	Failed   int      `json:"failed"`
	PassRate float64  `json:"pass_rate"`
	Judge    *float64 `json:"judge_score,omitempty"`
}

type evalReport struct {
	SuiteID string         `json:"suite_id,omitempty"`
	RunID   string         `json:"run_id,omitempty"`
	Status  string         `json:"status,omitempty"`
	Metrics map[string]any `json:"metrics,omitempty"`
	Items   []evalItem     `json:"items"`
	Summary evalSummary    `json:"summary"`
}

func (r evalReport) text(w io.Writer) {
	if r.RunID != "" {
		fmt.Fprintf(w, "run %s of %s: %s\n", r.RunID, r.SuiteID, r.Status)
	}
	fmt.Fprintln(w, "#\tRESULT\tSTATUS\tINPUT\tOUTPUT")
	for _, it := range r.Items {
		verdict := "FAIL"
		if it.Passed {
			verdict = "PASS"
		}
		out := it.Output
		if it.Error != "" {
			out = "error: " + it.Error
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", it.Index, verdict, it.Status, clip(it.Input, 40), clip(out, 60))
	}
	fmt.Fprintf(w, "passed %d of %d (%.1f%%)", r.Summary.Passed, r.Summary.Items, 100*r.Summary.PassRate)
	if r.Summary.Judge != nil {
		fmt.Fprintf(w, ", judge score %.3f", *r.Summary.Judge)
	}
	fmt.Fprintln(w)
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func summarize(items []evalItem) evalSummary {
	s := evalSummary{Items: len(items)}
	var judged []float64
	for _, it := range items {
		if it.Passed {
			s.Passed++
		}
		if it.JudgeScore != nil {
			judged = append(judged, *it.JudgeScore)
		}
	}
	s.Failed = s.Items - s.Passed
	if s.Items > 0 {
		s.PassRate = float64(s.Passed) / float64(s.Items)
	}
	if len(judged) > 0 {
		var t float64
		for _, j := range judged {
			t += j
		}
		m := t / float64(len(judged))
		s.Judge = &m
	}
	return s
}

// evalSuite starts a run of a stored suite and follows it to its end.
func (a *app) evalSuite(ctx context.Context, c *client, suiteID, name string, timeout, poll time.Duration) (evalReport, error) {
	base := "/api/evaluation/suites/" + url.PathEscape(suiteID) + "/runs"
	body := map[string]any{}
	if name != "" {
		body["name"] = name
	}
	var started struct {
		Data struct {
			RunID string `json:"run_id"`
		} `json:"data"`
	}
	if err := c.postJSON(ctx, base, body, &started); err != nil {
		return evalReport{}, err
	}
	if !a.json {
		fmt.Fprintf(a.env.Stderr, "started run %s of %s\n", started.Data.RunID, suiteID)
	}
	deadline := time.Now().Add(timeout)
	for {
		var run struct {
			Data struct {
				Status         string           `json:"status"`
				CompletedItems int              `json:"completed_items"`
				TotalItems     int              `json:"total_items"`
				Metrics        map[string]any   `json:"metrics"`
				Items          []map[string]any `json:"items"`
			} `json:"data"`
		}
		if err := c.getJSON(ctx, base+"/"+url.PathEscape(started.Data.RunID), &run); err != nil {
			return evalReport{}, err
		}
		d := run.Data
		if d.Status != "running" {
			rep := evalReport{SuiteID: suiteID, RunID: started.Data.RunID, Status: d.Status, Metrics: d.Metrics}
			for _, m := range d.Items {
				rep.Items = append(rep.Items, suiteItem(m))
			}
			rep.Summary = summarize(rep.Items)
			if d.Status == "failed" {
				return rep, fmt.Errorf("run %s failed: %v", started.Data.RunID, d.Metrics["error"])
			}
			return rep, nil
		}
		if time.Now().After(deadline) {
			return evalReport{}, fmt.Errorf("run %s still running after %s (%d of %d items); it goes on on the platform",
				started.Data.RunID, timeout, d.CompletedItems, d.TotalItems)
		}
		select {
		case <-ctx.Done():
			return evalReport{}, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func suiteItem(m map[string]any) evalItem {
	it := evalItem{}
	if f, ok := m["item_index"].(float64); ok {
		it.Index = int(f)
	}
	it.Input, _ = m["input"].(string)
	it.Status, _ = m["status"].(string)
	it.Passed, _ = m["passed"].(bool)
	it.Output, _ = m["output"].(string)
	if f, ok := m["judge_score"].(float64); ok {
		it.JudgeScore = &f
	}
	if cs, ok := m["checks"].([]any); ok {
		for _, c := range cs {
			if c, ok := c.(map[string]any); ok {
				it.Checks = append(it.Checks, c)
			}
		}
	}
	it.Trajectory, _ = m["trajectory_summary"].(map[string]any)
	if s, ok := m["agent_run_id"].(string); ok {
		it.AgentRunID = &s
	}
	if e, ok := m["error"].(string); ok {
		it.Error = e
	}
	return it
}

// sample is one line of a local JSONL.
type sample struct {
	Input          string  `json:"input"`
	Query          string  `json:"query"`
	Question       string  `json:"question"`
	Prompt         string  `json:"prompt"`
	ExpectedOutput *string `json:"expected_output"`
	Checks         []struct {
		Type          string `json:"type"`
		Value         string `json:"value"`
		Pattern       string `json:"pattern"`
		CaseSensitive bool   `json:"case_sensitive"`
	} `json:"checks"`
}

func (s sample) text() string {
	for _, t := range []string{s.Input, s.Query, s.Question, s.Prompt} {
		if strings.TrimSpace(t) != "" {
			return t
		}
	}
	return ""
}

func readSamples(path string) ([]sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []sample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var s sample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return nil, fmt.Errorf("%s line %d: not a JSON object: %v", path, n, err)
		}
		if s.text() == "" {
			return nil, fmt.Errorf("%s line %d: no input (input, query, question or prompt)", path, n)
		}
		for _, c := range s.Checks {
			switch c.Type {
			case "contains":
				if c.Value == "" {
					return nil, fmt.Errorf("%s line %d: a contains check needs a value", path, n)
				}
			case "regex":
				if _, err := regexp.Compile(c.Pattern); err != nil || c.Pattern == "" {
					return nil, fmt.Errorf("%s line %d: a regex check needs a valid pattern", path, n)
				}
			default:
				return nil, fmt.Errorf("%s line %d: check %q is not run locally (contains, regex; store a suite for json_schema and judge checks)", path, n, c.Type)
			}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": no samples")
	}
	return out, nil
}

// evalFile runs local samples through the blocking eval/runs route. Each
// sample's request id is derived from the experiment and the line, so a
// re-run of the same experiment replays finished samples instead of
// running them again.
func (a *app) evalFile(ctx context.Context, c *client, path, slug, experiment string, conc int, timeout time.Duration) (evalReport, error) {
	samples, err := readSamples(path)
	if err != nil {
		return evalReport{}, err
	}
	if experiment == "" {
		experiment = "cli-" + time.Now().UTC().Format("20060102-150405")
	}
	sum := sha256.Sum256([]byte(slug + "\x00" + experiment))
	prefix := "cli-" + hex.EncodeToString(sum[:8])
	items := make([]evalItem, len(samples))
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i, s := range samples {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			items[i] = a.evalSample(ctx, c, i, s, slug, experiment, fmt.Sprintf("%s-%d", prefix, i), timeout)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return evalReport{}, ctx.Err()
	}
	return evalReport{Items: items, Summary: summarize(items)}, nil
}

func (a *app) evalSample(ctx context.Context, c *client, i int, s sample, slug, experiment, requestID string, timeout time.Duration) evalItem {
	it := evalItem{Index: i, Input: s.text()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out struct {
		Status     string         `json:"status"`
		Output     string         `json:"output"`
		AgentRunID *string        `json:"agent_run_id"`
		Trajectory map[string]any `json:"trajectory_summary"`
		Error      *struct {
			Message *string `json:"message"`
		} `json:"error"`
	}
	body := map[string]any{"query": it.Input, "agent_slug": slug, "meta": map[string]any{"request_id": requestID},
		"evaluation": map[string]any{"experiment_name": experiment, "dataset_item_id": fmt.Sprint(i)}}
	if err := c.postJSON(ctx, "/api/agent-invocation/eval/runs", body, &out); err != nil {
		it.Status, it.Error = "error", oneLine(err.Error())
		if errors.Is(err, context.DeadlineExceeded) {
			it.Status, it.Error = "timeout", fmt.Sprintf("no answer within %s", timeout)
		}
		return it
	}
	it.Status, it.Output, it.AgentRunID, it.Trajectory = out.Status, out.Output, out.AgentRunID, out.Trajectory
	if out.Error != nil && out.Error.Message != nil {
		it.Error = *out.Error.Message
	}
	it.Passed = out.Status == "completed"
	for _, ch := range s.Checks {
		ok := false
		switch ch.Type {
		case "contains":
			if ch.CaseSensitive {
				ok = strings.Contains(out.Output, ch.Value)
			} else {
				ok = strings.Contains(strings.ToLower(out.Output), strings.ToLower(ch.Value))
			}
		case "regex":
			ok = regexp.MustCompile(ch.Pattern).MatchString(out.Output)
		}
		it.Checks = append(it.Checks, map[string]any{"type": ch.Type, "passed": ok})
		it.Passed = it.Passed && ok
	}
	return it
}
