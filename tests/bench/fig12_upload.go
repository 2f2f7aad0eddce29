package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/cli"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 12, second part: `yuxi kb upload` of a directory of small files
// against a minimal Go client making the same two calls per file (upload,
// then register) at the same concurrency.
const (
	upFiles       = 2000
	upDirs        = 20
	upConcurrency = 10
	upTarget      = 0.8
)

func figExternal(ctx context.Context, e *env, r *benchkit.Report) error {
	if err := figOpenAI(ctx, e, r); err != nil {
		return err
	}
	return figCLIUpload(ctx, e, r)
}

func figCLIUpload(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[12b] yuxi kb upload of 2,000 small files vs a minimal Go client",
		"intake as its own process (its events go nowhere, so files are stored and registered but not parsed); "+
			"the CLI (infra/cli, run in the bench process with --json) uploads a directory of 20 folders × 100 files at --concurrency 10, "+
			"hashing each file, listing the KB first and creating the folders; "+
			"floor: a minimal Go client making the same two calls per file (POST /api/knowledge/files/upload, POST …/documents) with 10 workers and the same API key, into another KB, run before and after the CLI (the faster run counts)")
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	tmp, err := os.MkdirTemp("", "yuxi-bench-upload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	in, err := e.startIntake(ctx, db, prefix, map[string]string{"YUXI_BLOB_URI": "file://" + filepath.Join(tmp, "objects")})
	if err != nil {
		return err
	}
	defer in.stop()

	mkFiles := func(dir, tag string) ([]string, error) {
		var paths []string
		for i := range upFiles {
			p := filepath.Join(dir, fmt.Sprintf("d%02d", i%upDirs), fmt.Sprintf("f%04d.md", i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			body := fmt.Sprintf("# %s %d\n\nA small file for the upload bench, number %d of the %s set.\n", tag, i, i, tag)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				return nil, err
			}
			paths = append(paths, p)
		}
		return paths, nil
	}
	cliDir := filepath.Join(tmp, "cli")
	if _, err := mkFiles(cliDir, "cli"); err != nil {
		return err
	}
	var rawPaths [2][]string
	for i := range rawPaths {
		if rawPaths[i], err = mkFiles(filepath.Join(tmp, fmt.Sprint("raw", i)), fmt.Sprint("raw", i)); err != nil {
			return err
		}
	}
	kb := func(name string) (string, error) {
		var out struct {
			KBID string `json:"kb_id"`
		}
		err := in.api.call(ctx, "POST", "/api/knowledge/databases", map[string]any{"database_name": name}, &out)
		return out.KBID, err
	}
	cliKB, err := kb("cli upload")
	if err != nil {
		return err
	}
	var rawKB [2]string
	for i := range rawKB {
		if rawKB[i], err = kb(fmt.Sprint("raw upload ", i)); err != nil {
			return err
		}
	}
	var key struct {
		Secret string `json:"secret"`
	}
	if err := in.api.call(ctx, "POST", "/api/user/apikey", map[string]any{"name": "bench-cli", "request_id": "bench-cli-key"}, &key); err != nil {
		return err
	}

	// The floor authenticates as the CLI does, with the API key.
	keyed := newAPI(in.api.base, 64)
	keyed.token = key.Secret
	defer keyed.hc.CloseIdleConnections()
	// The floor runs before and after the CLI (each into a KB of its own);
	// the faster of the two counts, so a machine busier during one of them
	// does not flatter the CLI.
	var rawRate float64
	raw := func(i int) error {
		e.Progress("figure 12b: minimal client (%d of 2), %d files at concurrency %d", i+1, upFiles, upConcurrency)
		start := time.Now()
		if err := rawUpload(ctx, keyed, rawKB[i], rawPaths[i]); err != nil {
			return err
		}
		rawRate = max(rawRate, float64(upFiles)/time.Since(start).Seconds())
		return nil
	}
	if err := raw(0); err != nil {
		return err
	}

	e.Progress("figure 12b: yuxi kb upload, %d files at concurrency %d", upFiles, upConcurrency)
	home := filepath.Join(tmp, "home")
	var stderr bytes.Buffer
	runCLI := func(args ...string) error {
		stderr.Reset()
		if code := cli.Run(ctx, args, cli.Env{Home: home, Stdout: io.Discard, Stderr: &stderr}); code != 0 {
			return fmt.Errorf("yuxi %v: exit %d: %s", args, code, stderr.String())
		}
		return nil
	}
	if err := runCLI("remote", "add", "bench", in.api.base); err != nil {
		return err
	}
	if err := runCLI("login", "--api-key", key.Secret); err != nil {
		return err
	}
	cliStart := time.Now()
	if err := runCLI("--json", "kb", "upload", cliKB, cliDir, "--concurrency", fmt.Sprint(upConcurrency)); err != nil {
		return err
	}
	cliRate := float64(upFiles) / time.Since(cliStart).Seconds()
	if err := raw(1); err != nil {
		return err
	}
	e.Progress("figure 12b: re-running the upload (everything skipped)")
	resumeStart := time.Now()
	if err := runCLI("--json", "kb", "upload", cliKB, cliDir, "--concurrency", fmt.Sprint(upConcurrency)); err != nil {
		return err
	}
	resume := time.Since(resumeStart)

	ratio := benchkit.Ratio(cliRate, rawRate)
	r.Line("cli_upload_files_per_s", fmt.Sprintf("%.0f/s", cliRate), fmt.Sprintf("%s vs minimal client %.0f/s", benchkit.X(ratio), rawRate),
		fmt.Sprintf("≥ %.1f×", upTarget), ratio >= upTarget)
	r.Detail("re-running the same upload (all %d files skipped by content hash) took %s", upFiles, benchkit.Ms(resume))
	return nil
}

// rawUpload is the floor: upload and register each file, upConcurrency at a time.
func rawUpload(ctx context.Context, a *api, kbID string, paths []string) error {
	work := make(chan string)
	errs := make(chan error, upConcurrency)
	var wg sync.WaitGroup
	for range upConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := rawOne(ctx, a, kbID, p); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, p := range paths {
		select {
		case work <- p:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func rawOne(ctx context.Context, a *api, kbID, p string) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", filepath.Base(p))
	if err != nil {
		return err
	}
	_, _ = part.Write(data)
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, "POST", a.base+"/api/knowledge/files/upload?kb_id="+kbID, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upload %s: %d %s", p, resp.StatusCode, b)
	}
	var up struct {
		FilePath string `json:"file_path"`
	}
	if err := json.Unmarshal(b, &up); err != nil || up.FilePath == "" {
		return errors.Join(fmt.Errorf("upload %s: %s", p, b), err)
	}
	return a.call(ctx, "POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": []string{up.FilePath}, "params": map[string]any{}}, nil)
}
