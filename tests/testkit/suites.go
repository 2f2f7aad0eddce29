package testkit

import "time"

// WaitSuiteRun polls an agent evaluation suite run until it leaves running
// and returns it with its items.
func (c *Client) WaitSuiteRun(suiteID, runID string, timeout time.Duration) map[string]any {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		run := c.Data("GET", "/api/evaluation/suites/"+suiteID+"/runs/"+runID, nil).(map[string]any)
		if run["status"] != "running" {
			return run
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("suite run %s still running after %s: %v of %v items", runID, timeout, run["completed_items"], run["total_items"])
		}
		time.Sleep(25 * time.Millisecond)
	}
}
