package testkit

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"time"
)

// UploadDataset posts a benchmark JSONL to a KB's evaluation datasets
// (multipart: file, name, description).
func (c *Client) UploadDataset(kbID, filename, name string, data []byte) Response {
	c.T.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("name", name)
	_ = mw.WriteField("description", "uploaded by a test")
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		c.T.Fatal(err)
	}
	_, _ = fw.Write(data)
	_ = mw.Close()
	req, err := http.NewRequest("POST", c.Base+"/api/evaluation/databases/"+kbID+"/datasets/upload", &buf)
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.http().Do(req)
	if err != nil {
		c.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// Data returns the "data" of a {"message":"success","data":…} answer.
func (c *Client) Data(method, path string, body any) any {
	c.T.Helper()
	r := c.Do(method, path, body)
	if r.Status != http.StatusOK {
		c.T.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	return r.JSON()["data"]
}

// WaitEvaluationRun polls a run until it is no longer running and returns
// its results page (page_size 100); onPoll sees every page read meanwhile.
func (c *Client) WaitEvaluationRun(kbID, runID string, timeout time.Duration, onPoll func(map[string]any)) map[string]any {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		run := c.Data("GET", "/api/evaluation/databases/"+kbID+"/runs/"+runID+"?page_size=100", nil).(map[string]any)
		if onPoll != nil {
			onPoll(run)
		}
		if run["status"] != "running" {
			return run
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("evaluation run %s still running after %s: %v of %v items", runID, timeout, run["completed_items"], run["total_items"])
		}
		time.Sleep(25 * time.Millisecond)
	}
}
