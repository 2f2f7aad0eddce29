package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// localFile is a file to upload: its path here and its path in the KB.
type localFile struct {
	Path string
	Rel  string // slash-separated, relative to the uploaded directory
}

type uploadFailure struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

type uploadSummary struct {
	KBID     string          `json:"kb_id"`
	Total    int             `json:"total"`
	Uploaded int             `json:"uploaded"`
	Skipped  int             `json:"skipped"`
	Failed   int             `json:"failed"`
	Failures []uploadFailure `json:"failures"`
	Seconds  float64         `json:"seconds"`
}

// kbUpload uploads files and directories into a KB, keeping a directory's
// relative paths as folders. A file whose content (SHA-256) the KB already
// holds is skipped, so re-running an interrupted upload resumes it.
func (a *app) kbUpload(ctx context.Context, args []string) error {
	fset := flag.NewFlagSet("kb upload", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	conc := fset.Int("concurrency", 10, "uploads in flight (1-300)")
	exts := fset.String("include-ext", "", "only these extensions, comma-separated (md,txt,…)")
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return usagef("kb upload: %v", err)
	}
	if len(pos) < 2 {
		return usagef("kb upload KB_ID PATH...")
	}
	if *conc < 1 || *conc > 300 {
		return usagef("--concurrency must be between 1 and 300")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	kbID := pos[0]
	files, err := collect(pos[1:], *exts)
	if err != nil {
		return err
	}
	have, folders, err := existing(ctx, c, kbID)
	if err != nil {
		return fmt.Errorf("list the knowledge base: %w", err)
	}
	parents, err := ensureFolders(ctx, c, kbID, files, folders)
	if err != nil {
		return err
	}

	start := time.Now()
	sum := uploadSummary{KBID: kbID, Total: len(files), Failures: []uploadFailure{}}
	var done, uploaded, skipped atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{} // content uploaded in this run
	for h := range have {
		seen[h] = true
	}
	work := make(chan localFile)
	var wg sync.WaitGroup
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				skip, err := uploadOne(ctx, c, kbID, f, parents[path.Dir(f.Rel)], &mu, seen)
				switch {
				case err != nil:
					mu.Lock()
					sum.Failures = append(sum.Failures, uploadFailure{Path: f.Path, Error: oneLine(err.Error())})
					mu.Unlock()
				case skip:
					skipped.Add(1)
				default:
					uploaded.Add(1)
				}
				done.Add(1)
			}
		}()
	}
	stop := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if a.json {
			return
		}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				progress(a.env.Stderr, int(done.Load()), len(files), time.Since(start))
			case <-stop:
				progress(a.env.Stderr, int(done.Load()), len(files), time.Since(start))
				fmt.Fprintln(a.env.Stderr)
				return
			}
		}
	}()
	for _, f := range files {
		select {
		case work <- f:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	close(stop)
	<-progressDone
	sort.Slice(sum.Failures, func(i, j int) bool { return sum.Failures[i].Path < sum.Failures[j].Path })
	sum.Uploaded, sum.Skipped, sum.Failed = int(uploaded.Load()), int(skipped.Load()), len(sum.Failures)
	sum.Seconds = time.Since(start).Seconds()
	if err := a.out(sum, func(w io.Writer) {
		fmt.Fprintf(w, "%d uploaded, %d skipped (already in the knowledge base), %d failed of %d files in %.1fs\n",
			sum.Uploaded, sum.Skipped, sum.Failed, sum.Total, sum.Seconds)
		for _, f := range sum.Failures {
			fmt.Fprintf(w, "  failed: %s: %s\n", f.Path, f.Error)
		}
	}); err != nil {
		return err
	}
	if sum.Failed > 0 {
		return fmt.Errorf("%d of %d files failed; re-run the same command to retry them", sum.Failed, sum.Total)
	}
	return ctx.Err()
}

func progress(w io.Writer, done, total int, elapsed time.Duration) {
	rate := float64(done) / elapsed.Seconds()
	eta := "-"
	if rate > 0 {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	width := 30
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	fmt.Fprintf(w, "\r[%s%s] %d/%d files  %.1f files/s  ETA %s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, rate, eta)
}

// uploadOne hashes f, skips content already present, and otherwise uploads
// and registers it (parsed and indexed by the platform) in folder parent.
func uploadOne(ctx context.Context, c *client, kbID string, f localFile, parent *string, mu *sync.Mutex, seen map[string]bool) (bool, error) {
	h, data, err := hashFile(f.Path)
	if err != nil {
		return false, err
	}
	mu.Lock()
	dup := seen[h]
	seen[h] = true
	mu.Unlock()
	if dup {
		return true, nil
	}
	fail := func(err error) (bool, error) {
		mu.Lock()
		delete(seen, h) // a failed upload is retried by the next run
		mu.Unlock()
		return false, err
	}
	up, err := c.uploadFile(ctx, kbID, f.Path, data)
	if err != nil {
		return fail(err)
	}
	params := map[string]any{"content_hashes": map[string]string{up.FilePath: h}}
	if parent != nil {
		params["parent_id"] = *parent
	}
	if err := c.postJSON(ctx, "/api/knowledge/databases/"+url.PathEscape(kbID)+"/documents",
		map[string]any{"items": []string{up.FilePath}, "params": params}, nil); err != nil {
		return fail(err)
	}
	return false, nil
}

// hashFile answers the SHA-256 of p's content, and the content itself
// when the file is small (it is then uploaded from memory, read once).
func hashFile(p string) (string, []byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if st.Size() <= smallFile {
		data, err := io.ReadAll(f)
		if err != nil {
			return "", nil, err
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:]), data, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(h.Sum(nil)), nil, nil
}

// collect lists the files under paths (a file stands for itself at the
// root), keeping only exts when given.
func collect(paths []string, exts string) ([]localFile, error) {
	allow := map[string]bool{}
	for _, e := range strings.Split(exts, ",") {
		if e = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(e), ".")); e != "" {
			allow[e] = true
		}
	}
	ok := func(name string) bool {
		return len(allow) == 0 || allow[strings.ToLower(strings.TrimPrefix(filepath.Ext(name), "."))]
	}
	var out []localFile
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			if ok(p) {
				out = append(out, localFile{Path: p, Rel: filepath.Base(p)})
			}
			continue
		}
		err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if fp != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") || !ok(d.Name()) {
				return nil
			}
			rel, err := filepath.Rel(p, fp)
			if err != nil {
				return err
			}
			out = append(out, localFile{Path: fp, Rel: filepath.ToSlash(rel)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no files to upload")
	}
	return out, nil
}

// existing reads the KB's content hashes and folders (folder key: parent
// folder id + "/" + name, the root's id being "").
func existing(ctx context.Context, c *client, kbID string) (map[string]bool, map[string]string, error) {
	hashes, folders := map[string]bool{}, map[string]string{}
	for offset := 0; ; offset += 500 {
		var page struct {
			Files []struct {
				FileID      string  `json:"file_id"`
				ParentID    *string `json:"parent_id"`
				Filename    string  `json:"filename"`
				ContentHash *string `json:"content_hash"`
				IsFolder    bool    `json:"is_folder"`
			} `json:"files"`
			Total int `json:"total"`
		}
		if err := c.getJSON(ctx, fmt.Sprintf("/api/knowledge/databases/%s/documents/search?limit=500&offset=%d", url.PathEscape(kbID), offset), &page); err != nil {
			return nil, nil, err
		}
		for _, f := range page.Files {
			if f.IsFolder {
				parent := ""
				if f.ParentID != nil {
					parent = *f.ParentID
				}
				folders[parent+"/"+f.Filename] = f.FileID
			} else if f.ContentHash != nil {
				hashes[*f.ContentHash] = true
			}
		}
		if len(page.Files) < 500 || offset+500 >= page.Total {
			return hashes, folders, nil
		}
	}
}

// ensureFolders creates the folders of the files' relative directories
// that the KB lacks and answers each directory's folder id (nil: the root).
func ensureFolders(ctx context.Context, c *client, kbID string, files []localFile, folders map[string]string) (map[string]*string, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.Rel); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Slice(sorted, func(i, j int) bool {
		return strings.Count(sorted[i], "/") < strings.Count(sorted[j], "/") || (strings.Count(sorted[i], "/") == strings.Count(sorted[j], "/") && sorted[i] < sorted[j])
	})
	ids := map[string]*string{".": nil}
	for _, d := range sorted {
		parent := ids[path.Dir(d)]
		pid := ""
		if parent != nil {
			pid = *parent
		}
		name := path.Base(d)
		if id, ok := folders[pid+"/"+name]; ok {
			ids[d] = &id
			continue
		}
		body := map[string]any{"folder_name": name}
		if parent != nil {
			body["parent_id"] = *parent
		}
		var f struct {
			FileID string `json:"file_id"`
		}
		if err := c.postJSON(ctx, "/api/knowledge/databases/"+url.PathEscape(kbID)+"/folders", body, &f); err != nil {
			return nil, fmt.Errorf("create folder %s: %w", d, err)
		}
		id := f.FileID
		ids[d] = &id
		folders[pid+"/"+name] = id
	}
	return ids, nil
}
