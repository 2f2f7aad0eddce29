package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/userfiles"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// The viewer-tree part of figure 10: a thread's outputs directory of 1,000
// files listed through the viewer's use case (shared/userfiles.Tree: the
// provisioner's authenticated file API over HTTP, no sandbox started)
// against `find` over the same host directory run as a process.
const (
	viewerFiles  = 1000
	viewerRounds = 100
	viewerTarget = 2.0
)

// benchThreads answers every thread as the caller's: the figure measures
// the file path, not the thread row lookup (one indexed SELECT).
type benchThreads struct{}

func (benchThreads) Get(context.Context, string, string) (thread.Thread, error) {
	return thread.Thread{}, nil
}
func (benchThreads) AddAttachments(context.Context, string, string, []thread.Attachment) ([]thread.Attachment, error) {
	return nil, nil
}
func (benchThreads) Attachments(context.Context, string, string) ([]thread.Attachment, error) {
	return nil, nil
}
func (benchThreads) RemoveAttachment(context.Context, string, string, string) (thread.Attachment, error) {
	return thread.Attachment{}, nil
}

func viewerTree(ctx context.Context, e *env, r *benchkit.Report, c *sandbox.Client, hostOutputs func(sandbox.Scope) string) error {
	scope := sandbox.Scope{UID: "bench", FileThread: "viewer"}
	for i := range viewerFiles {
		if _, err := c.WriteFile(ctx, scope, sandbox.OutputsDir+"/f"+strconv.Itoa(i)+".txt", []byte("x"), false); err != nil {
			return err
		}
	}
	svc := userfiles.New(userfiles.Config{Sandbox: c, Threads: benchThreads{}})
	dir := hostOutputs(scope)
	floor := func() (time.Duration, error) {
		start := time.Now()
		if out, err := exec.CommandContext(ctx, "find", dir).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("find: %v: %s", err, out)
		}
		return time.Since(start), nil
	}
	tree := func() (time.Duration, error) {
		start := time.Now()
		es, err := svc.Tree(ctx, "bench", "viewer", sandbox.OutputsDir)
		if err != nil {
			return 0, err
		}
		if len(es) != viewerFiles {
			return 0, fmt.Errorf("tree lists %d entries, want %d", len(es), viewerFiles)
		}
		return time.Since(start), nil
	}
	for range 3 {
		if _, err := floor(); err != nil {
			return err
		}
		if _, err := tree(); err != nil {
			return err
		}
	}
	e.Progress("figure 10: %d viewer trees of %d files, each next to a find", viewerRounds, viewerFiles)
	var got, base benchkit.Samples
	for range viewerRounds {
		f, err := floor()
		if err != nil {
			return err
		}
		d, err := tree()
		if err != nil {
			return err
		}
		base, got = append(base, f), append(got, d)
	}
	gp, fp := got.Sorted().P99(), base.Sorted().P99()
	ratio := benchkit.DurRatio(gp, fp)
	r.Line("viewer_tree_1000_p99", benchkit.Ms(gp), benchkit.X(ratio)+" vs find "+benchkit.Ms(fp), "≤ "+benchkit.X(viewerTarget), ratio <= viewerTarget)
	r.Detail("viewer tree p50 %s, find p50 %s (through shared/userfiles and the provisioner's HTTP file API; intake's auth and thread lookup not included)",
		benchkit.Ms(got.Sorted().P50()), benchkit.Ms(base.Sorted().P50()))
	return nil
}
