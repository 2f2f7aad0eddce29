package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/tests/mcpfixture"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The two-account suite, generated from the route table.
//
// Account A owns one of each resource; for every route of the table whose
// Check is a resource check, each account B that passes the route's role
// rule (a user and an admin of A's department, an admin of another one)
// calls it with A's ids in the path and a hostile body naming A's
// resources, and must be refused — 403 or 404 with an error code (401 for
// the bucket webhook's shared secret) — and A's resources must be exactly
// as before: the same rows, the same objects, the same answers to A.
//
// The suite iterates the table: a route whose Check has no fixture here,
// or whose path names a parameter its fixture cannot fill, fails it, so a
// new route or a new kind of check cannot go unprobed. It also checks that
// the table's Check column tells the truth where it can: path parameters
// are resource ids only with a check; a route with a read check changes
// nothing (or is listed with its reason); a reader (shared read access) is
// refused every manage route and served every read route. Every read route
// without a check (the lists) answers B with none of A's ids or contents.
// Beyond the table: B's own KB paired with A's document, folder, source or
// image ids, in the path or in the body, and an API key minted for A.

var routeParam = regexp.MustCompile(`\{([a-z_]+)(\.\.\.)?\}|\{\$\}`)

// fill substitutes ids for a route's path parameters; missing names the
// parameters ids has no value for.
func fill(path string, ids map[string]string) (out string, missing []string) {
	out = routeParam.ReplaceAllStringFunc(path, func(m string) string {
		if m == "{$}" {
			return ""
		}
		name := routeParam.FindStringSubmatch(m)[1]
		v, ok := ids[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	return out, missing
}

func params(path string) []string {
	var out []string
	for _, m := range routeParam.FindAllStringSubmatch(path, -1) {
		if m[1] != "" {
			out = append(out, m[1])
		}
	}
	return out
}

// unscopedParams are path parameters that name no one's resource, so a
// route may take them without a resource check.
var unscopedParams = map[string]string{
	"backend_id":  "names code (the chatbot backend), the same for every user",
	"uid":         "a candidate login id: check-uid answers only whether it is taken, as the original",
	"image_key":   "an uploaded image's unguessable key (128 random bits), the capability <img> tags use",
	"key":         "a system setting name (/api/system/config/options/{key}): settings are instance-wide, the Admin role is the check",
	"provider_id": "a model provider id (/api/system/model-providers/{provider_id}): providers are instance-wide, the Admin role is the check (as the original)",
	"tool_name":   "an MCP server's tool (/api/system/mcp-servers/{slug}/tools/{tool_name}/toggle): see unscopedPaths",
}

// unscopedPaths are path prefixes whose parameters name no one's resource
// (by path: {slug} is a skill elsewhere, and skills are checked).
var unscopedPaths = map[string]string{
	"/api/system/mcp-servers/": "MCP servers are instance-wide, like model providers: the Admin role is the check (as the original); users only list them, redacted",
}

func unscopedPath(path string) bool {
	for prefix := range unscopedPaths {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// checkParam is the path parameter each resource check is about; the route
// must carry it (kb_manage on the upload route takes ?kb_id=).
var checkParam = map[intake.Check]string{
	intake.OwnThread: "thread_id", intake.OwnRun: "run_id", intake.OwnRequest: "request_id", intake.OwnAPIKey: "api_key_id",
	intake.ReadAgent: "agent_id", intake.ManageAgent: "agent_id", intake.ReadKB: "kb_id", intake.ManageKB: "kb_id",
	intake.ReadDataset: "dataset_id", intake.ManageDataset: "dataset_id",
	intake.ReadSchedule: "schedule_id", intake.ManageSchedule: "schedule_id",
	intake.OwnMessage: "message_id", intake.OwnProject: "project_id",
	// admin: tasks are checked against their knowledge base.
	intake.ReadTask: "task_id", intake.ManageTask: "task_id",
	// ext: the skill checks.
	intake.ReadSkill: "slug", intake.ManageSkill: "slug", intake.OwnSkillDraft: "draft_id", intake.OwnPersonalSkill: "slug",
	// evalsuites:
	intake.OwnSuite: "suite_id",
}

// listQuery completes list routes without a check that need a query to
// answer 200 (and then must still show B nothing of A's).
var listQuery = map[string]string{
	"GET /api/chat/threads/search": "?q=alice",
}

// readOnlyWrites are non-GET routes with a read check, and why reading is enough.
var readOnlyWrites = map[string]string{
	"POST /api/knowledge/databases/{kb_id}/query":                         "a search: the body is the query",
	"POST /api/knowledge/databases/{kb_id}/query-test":                    "a search: the body is the query",
	"POST /api/knowledge/databases/external/{kb_id}/retrieve":             "a search: the body is the query",
	"POST /api/knowledge/databases/external/{kb_id}/files/{file_id}/find": "a search in one file",
	// The instance default: superadmin-only (issue 9, finding 3), and the
	// superadmin reads every agent.
	"POST /api/agent/{agent_id}/set_default": "instance setting; superadmin-only",
}

// readerQuery completes read routes that need a query to answer 200.
var readerQuery = map[string]string{
	"GET /api/knowledge/databases/{kb_id}/documents/exists": "?filename=handbook.md",
	"GET /api/system/skills/{slug}/file":                    "?path=SKILL.md",
	"GET /api/skills/personal/{slug}/file":                  "?path=SKILL.md",
}

// caller is one account probing A's resources.
type caller struct {
	name  string
	c     *testkit.Client
	admin bool
}

// fixture is what a check kind needs: A's ids by path parameter, the
// callers it refuses, the refusal it expects, and special requests.
type fixture struct {
	ids     map[string]string
	status  []int
	codeOK  func(code string) bool
	callers []caller
	// call overrides the request for a route pattern (bodies that must name
	// A's resources, multipart uploads, the webhook's headers); several
	// requests per route are allowed.
	call map[string][]func(c *testkit.Client) testkit.Response
	// reader may read the resource but not manage it (nil: no such account).
	reader *testkit.Client
}

func refusalCode(code string) bool {
	return strings.HasSuffix(code, "_not_found") || strings.HasSuffix(code, "_forbidden")
}

// kbInBody is the fixture of the routes that name the knowledge base in
// their body (fetch-url, import-workspace): every attacker and the KB's
// reader name A's KB and are refused.
func kbInBody(f fixture, kbID string, reader *testkit.Client) fixture {
	f.callers = append(slices.Clone(f.callers), caller{"reader of A's KB", reader, true})
	f.reader = nil
	f.call = map[string][]func(c *testkit.Client) testkit.Response{
		"POST /api/knowledge/files/fetch-url": {func(c *testkit.Client) testkit.Response {
			return c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": "http://127.0.0.1:1/x", "kb_id": kbID})
		}},
		"POST /api/knowledge/files/import-workspace": {func(c *testkit.Client) testkit.Response {
			return c.Do("POST", "/api/knowledge/files/import-workspace", map[string]any{"kb_id": kbID, "paths": []string{"/alice-plan.md"}})
		}},
	}
	return f
}

func TestTwoAccountSuite(t *testing.T) {
	t.Parallel()
	// A real provisioner: the file routes read and write through it.
	sb := provisionertest.Start(t, provisioner.Config{})
	// ext3: a live MCP server for the /api/system/mcp-servers routes, the
	// only loopback address allowed out.
	fx := mcpfixture.Start(t)
	fxHost := strings.TrimPrefix(strings.TrimSuffix(fx.URL, "/mcp"), "http://")
	p := testkit.StartLocal(t, testkit.Env{"YUXI_NOTIFY_TOKEN": testkit.NotifyToken, "YUXI_OUTBOUND_ALLOW": fxHost},
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	ctx := context.Background()
	pool := p.P.App.Pool
	super := p.Admin
	// The other department, created as the product does: with its admin.
	r := super.Do("POST", "/api/departments", map[string]any{"name": "elsewhere", "description": "another team",
		"admin_uid": "outsider", "admin_password": "password-outsider"})
	if r.Status != http.StatusCreated {
		t.Fatalf("create department: %d %s", r.Status, r.Body)
	}
	otherDept := int64(r.JSON()["id"].(float64))
	timeoutClient := &http.Client{Timeout: 15 * time.Second} // a stream served to B would otherwise hang the test
	mk := func(uid, role string, dept *int64) *testkit.Client {
		c := super.CreateUser(uid, role, dept)
		c.HTTP = timeoutClient
		return c
	}
	alice := mk("alice", "user", nil)       // A of the chat resources
	kbOwner := mk("kb-owner", "admin", nil) // A of the knowledge resources
	bob := mk("bob", "user", nil)           // B: a user of A's department
	rival := mk("rival", "admin", nil)      // B: an admin of A's department
	outsider := super.As("").Login("outsider", "password-outsider")
	outsider.HTTP = timeoutClient
	carol := mk("carol", "user", nil)         // reads alice's agent
	kbReader := mk("kb-reader", "admin", nil) // reads kb-owner's KB
	attackers := []caller{{"user of A's department", bob, false}, {"admin of A's department", rival, true}, {"admin of another department", outsider, true}}
	outsiderUser := mk("outsider-user", "user", &otherDept)
	attackers = append(attackers, caller{"user of another department", outsiderUser, false})
	// Every call is recorded per route and role (the coverage the closing note reports).
	cover := newCoverage(intake.New(intake.Deps{KBs: &kb.Store{}, Skills: &skill.Service{}, Budgets: &budget.Service{}, MCP: &mcp.Toolset{}}).Routes())
	alice.HTTP, kbOwner.HTTP = cover.client("owner"), cover.client("owner")
	for _, b := range attackers {
		b.c.HTTP = cover.client(b.name)
	}

	// --- A's chat resources: a private agent, a thread with a finished run
	// and its request, an API key.
	agentID := alice.OK("POST", "/api/agent", map[string]any{"name": "Alice's private agent", "slug": "alice-private",
		"description": "private", "config_json": map[string]any{"context": map[string]any{"system_prompt": "alice's secret prompt"}},
		"share_config": map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "user", "user_uids": []string{"carol"}}}})["slug"].(string)
	threadID := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": agentID, "title": "alice's thread"})["id"].(string)
	projectID := alice.OK("POST", "/api/projects", map[string]any{"name": "alice's project"})["id"].(string) // admin3
	p.LLM.Enqueue(llmtest.Text("alice's answer"))
	in := alice.Submit(threadID, "alice's question", map[string]any{"agent_slug": agentID})
	runID, requestID := in["run_id"].(string), in["request_id"].(string)
	if r := testkit.Render(alice.Collect(runID, 20*time.Second)); r.EndStatus != "completed" {
		t.Fatalf("alice's run: %+v", r)
	}
	// A's files: an attachment confirmed into the thread, a temporary one,
	// a workspace file.
	aliceTmp := alice.PostFile("/api/chat/attachments/tmp", "alice-notes.txt", []byte("alice's attachment text")).JSON()["object_name"].(string)
	aliceConfirm := alice.PostFile("/api/chat/attachments/tmp", "alice-brief.txt", []byte("alice's brief")).JSON()["object_name"].(string)
	aliceFileID := alice.OK("POST", "/api/chat/thread/"+threadID+"/attachments/confirm", map[string]any{
		"attachments": []map[string]any{{"object_name": aliceConfirm}}})["attachments"].([]any)[0].(map[string]any)["file_id"].(string)
	alice.OK("PUT", "/api/workspace/file", map[string]any{"path": "/alice-plan.md", "content": "alice's workspace plan"})
	messageID := ""
	for _, m := range alice.OK("GET", "/api/chat/thread/"+threadID+"/history", nil)["history"].([]any) {
		if m := m.(map[string]any); m["type"] == "ai" {
			messageID = fmt.Sprint(m["id"])
		}
	}
	alice.OK("POST", "/api/chat/message/"+messageID+"/feedback", map[string]any{"rating": "like", "reason": "alice's feedback"})
	// evalsuites: A's agent evaluation suite of A's private agent, with a finished run.
	suiteID := alice.Data("POST", "/api/evaluation/suites", map[string]any{"name": "alice's suite", "agent_slug": agentID,
		"items": []map[string]any{{"input": "alice's suite task", "checks": []map[string]any{{"type": "contains", "value": "suite"}}}}}).(map[string]any)["suite_id"].(string)
	p.LLM.Enqueue(llmtest.Text("alice's suite answer"))
	suiteRunID := alice.Data("POST", "/api/evaluation/suites/"+suiteID+"/runs", map[string]any{}).(map[string]any)["run_id"].(string)
	if run := alice.WaitSuiteRun(suiteID, suiteRunID, 30*time.Second); run["status"] != "completed" || run["overall_score"] != 1.0 {
		t.Fatalf("alice's suite run: %v", run)
	}
	suiteIDs := map[string]string{"suite_id": suiteID, "run_id": suiteRunID}
	// eval3: a plain user schedules her own suite.
	suiteSchedule := alice.Data("POST", "/api/evaluation/schedules", map[string]any{"suite_id": suiteID, "name": "alice's nightly",
		"cron": "0 4 * * *"}).(map[string]any)["schedule_id"].(string)
	key := alice.OK("POST", "/api/user/apikey", map[string]any{"request_id": "alice-key-0001", "name": "alice's key"})["api_key"].(map[string]any)
	keyID, keyPrefix := fmt.Sprint(key["id"]), key["key_prefix"].(string)
	aliceUserID := alice.OK("GET", "/api/auth/me", nil)["id"]
	// A's identity resources: settings, a sandbox secret, an approved CLI login.
	alice.OK("PUT", "/api/user/config", map[string]any{"enable_memory": true})
	alice.OK("PUT", "/api/user/agent-env", map[string]any{"env": map[string]any{"ALICE_TOKEN": "alice-env-secret"}})
	cliCode := alice.As("").OK("POST", "/api/auth/cli/sessions", map[string]any{"key_name": "alice's laptop"})["user_code"].(string)
	alice.OK("POST", "/api/auth/cli/sessions/"+cliCode+"/approve", nil)

	// --- A's knowledge resources: a private KB (read-shared with kbReader)
	// with a document, an image, a folder, a bucket source and an upload
	// not yet added.
	kbID := kbOwner.NewKnowledgeBase("owner's KB", "private", nil)
	kbOwner.OK("PUT", "/api/knowledge/databases/"+kbID, map[string]any{"share_config": map[string]any{"version": 2,
		"read_scope": map[string]any{"access_level": "user", "user_uids": []string{"kb-reader"}}}})
	ids := kbOwner.AddDocuments(kbID, []string{
		kbOwner.UploadKB(kbID, "handbook.md", []byte("# Handbook\n\nThe pangolin protocol requires two keys.\n")),
		kbOwner.UploadKB(kbID, "chart.zip", docparsetest.MinerUBundle("# Chart\n\n![c](images/c.png)\n\nThe tapir chart.\n", map[string][]byte{"c.png": docparsetest.PNG()})),
	}, nil)
	docID, bundleID := ids[0], ids[1]
	kbOwner.WaitFile(kbID, docID, ingestWait, "indexed")
	kbOwner.WaitFile(kbID, bundleID, ingestWait, "indexed")
	image := ""
	for _, l := range kbOwner.Content(kbID, bundleID).Lines {
		if i := strings.Index(l, "(/api/knowledge/databases/"+kbID+"/images/"); i >= 0 {
			image = strings.TrimPrefix(strings.TrimSuffix(l[i+1:], ")"), "/api/knowledge/databases/"+kbID+"/images/")
		}
	}
	if image == "" {
		t.Fatal("no image link in the bundle's content")
	}
	folderID := kbOwner.OK("POST", "/api/knowledge/databases/"+kbID+"/folders", map[string]any{"folder_name": "owner's folder"})["file_id"].(string)
	sourceID := fmt.Sprint(kbOwner.OK("POST", "/api/knowledge/databases/"+kbID+"/sources", map[string]any{"provider": "s3", "bucket": "owner-bucket", "prefix": "docs/"})["id"])
	pendingUpload := kbOwner.UploadKB(kbID, "pending.md", []byte("# Pending\n"))
	revision := kbOwner.OK("GET", "/api/knowledge/databases/"+kbID+"/documents/"+docID+"/content", nil)["content_revision"].(string)
	// An evaluation dataset of A's KB and a finished run of it.
	up := kbOwner.UploadDataset(kbID, "owner.jsonl", "owner's benchmark", []byte(`{"query":"pangolin protocol keys"}`+"\n"))
	if up.Status != http.StatusOK {
		t.Fatalf("dataset upload: %d %s", up.Status, up.Body)
	}
	datasetID := up.JSON()["data"].(map[string]any)["dataset_id"].(string)
	evalRunID := kbOwner.Data("POST", "/api/evaluation/databases/"+kbID+"/runs", map[string]any{"dataset_id": datasetID}).(map[string]any)["run_id"].(string)
	if run := kbOwner.WaitEvaluationRun(kbID, evalRunID, 30*time.Second, nil); run["status"] != "completed" {
		t.Fatalf("owner's evaluation run: %v", run)
	}
	scheduleID := kbOwner.Data("POST", "/api/evaluation/schedules", map[string]any{"kb_id": kbID, "cron": "0 3 * * *",
		"dataset_id": datasetID}).(map[string]any)["schedule_id"].(string)
	testkit.WaitKnowledgeSettled(t, pool, bucketSettle)
	// admin: the ingestion batch of A's documents is a task (GET /api/tasks/{task_id}).
	var taskID string
	if err := pool.QueryRow(ctx, `SELECT ingest_batch FROM knowledge_files WHERE file_id = $1`, docID).Scan(&taskID); err != nil || taskID == "" {
		t.Fatalf("the owner's ingestion batch: %q %v", taskID, err)
	}

	// ext: A's skills. kb-owner (an admin) installs a shared skill
	// read-shared with kb-reader and keeps a second install draft; alice
	// installs a personal skill into her workspace.
	skillMD := func(slug, desc string) []byte {
		return []byte("---\nname: " + slug + "\ndescription: " + desc + "\n---\n# " + slug + "\n\nThe okapi recipe.\n")
	}
	prepareSkill := func(c *testkit.Client, slug, desc string) string {
		t.Helper()
		r := c.PostFile("/api/skills/import/prepare", "SKILL.md", skillMD(slug, desc))
		if r.Status != http.StatusOK {
			t.Fatalf("prepare %s: %d %s", slug, r.Status, r.Body)
		}
		return r.JSON()["data"].(map[string]any)["draft_id"].(string)
	}
	installed := func(r map[string]any, want float64) {
		t.Helper()
		if n := r["summary"].(map[string]any)["success"]; n != want {
			t.Fatalf("installed %v skills, want %v: %v", n, want, r)
		}
	}
	ownerSkillShare := map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "user", "user_uids": []string{"kb-reader"}}}
	installed(kbOwner.OK("POST", "/api/skills/install-drafts/"+prepareSkill(kbOwner, "owner-skill", "the owner's skill")+"/confirm",
		map[string]any{"share_config": ownerSkillShare}), 1)
	pendingDraft := prepareSkill(kbOwner, "owner-pending-skill", "the owner's pending skill")
	installed(alice.OK("POST", "/api/skills/personal/install-drafts/"+prepareSkill(alice, "alice-skill", "alice's personal skill")+"/confirm", nil), 1)
	skillIDs := map[string]string{"slug": "owner-skill", "draft_id": pendingDraft}
	// ext3: an MCP server (instance-wide, the superadmin's here) with a secret header.
	const mcpHeaderSecret = "mcp-header-secret-0451"
	super.OK("POST", "/api/system/mcp-servers", map[string]any{"name": "fixture", "transport": "streamable_http", "url": fx.URL,
		"headers": map[string]string{"X-Fixture-Key": mcpHeaderSecret}})
	personalIDs := map[string]string{"slug": "alice-skill"}

	// B's own KB, for calls that pair it with A's document, folder, source
	// or image ids.
	rivalKB := rival.NewKnowledgeBase("rival's KB", "the rival's own", nil)
	rivalFolder := rival.OK("POST", "/api/knowledge/databases/"+rivalKB+"/folders", map[string]any{"folder_name": "rival's folder"})["file_id"].(string)
	// A's ids and secrets, none of which a list answers B with.
	secrets := []string{threadID, runID, requestID, agentID, "alice's secret prompt", "alice's thread", "alice's question", "alice's answer",
		keyPrefix, kbID, docID, bundleID, folderID, image, "owner-bucket", "pangolin", datasetID, evalRunID, "owner's benchmark", scheduleID}
	secrets = append(secrets, "alice-env-secret", "alice's laptop", cliCode)
	secrets = append(secrets, "alice-notes", "alice-brief", "alice-plan", "alice's workspace plan", aliceFileID)
	secrets = append(secrets, "alice's feedback")
	secrets = append(secrets, taskID)                                                                     // admin
	secrets = append(secrets, "owner-skill", "owner-pending-skill", "alice-skill", "okapi", pendingDraft) // ext
	secrets = append(secrets, suiteID, suiteRunID, "alice's suite")                                       // evalsuites
	secrets = append(secrets, mcpHeaderSecret)                                                            // ext3: never answered, not even to admins
	secrets = append(secrets, suiteSchedule, "alice's nightly")                                           // eval3
	bobThread := bob.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "bob's"})["id"].(string)

	hostile := map[string]any{
		"title": "pwned", "name": "pwned", "description": "hijacked", "is_enabled": false, "expires_at": "2001-01-01T00:00:00Z",
		"share_config": map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "global"}, "manage_scope": map[string]any{"access_level": "global"}},
		"config_json":  map[string]any{"context": map[string]any{"system_prompt": "pwned"}},
		"items":        []string{pendingUpload}, "file_ids": []string{docID, folderID}, "folder_name": "pwned", "new_parent_id": folderID, "parent_id": folderID,
		"content": "# pwned\n", "revision": revision, "query": "pangolin protocol", "meta": map[string]any{"search_mode": "keyword"},
		"options": map[string]any{"search_mode": "keyword"}, "patterns": []string{"pangolin"}, "final_top_k": 1,
		"provider": "s3", "bucket": "owner-bucket", "prefix": "docs/", "params": map[string]any{},
	}
	identityIDs := map[string]string{"user_id": fmt.Sprint(aliceUserID), "department_id": fmt.Sprint(otherDept), "user_code": cliCode,
		"thread_id": threadID} // admin: the superadmin's dashboard reads any conversation
	chatIDs := map[string]string{"thread_id": threadID, "run_id": runID, "request_id": requestID, "api_key_id": keyID, "agent_id": agentID,
		"path": "uploads/alice-brief.txt", "file_id": aliceFileID, "message_id": messageID, "project_id": projectID}
	kbIDs := map[string]string{"kb_id": kbID, "doc_id": docID, "file_id": docID, "folder_id": folderID, "source_id": sourceID, "object_path": image,
		"dataset_id": datasetID, "run_id": evalRunID, "schedule_id": scheduleID, "task_id": taskID}
	chat := func(reader *testkit.Client) fixture {
		return fixture{ids: chatIDs, status: []int{403, 404}, codeOK: refusalCode, callers: attackers, reader: reader}
	}
	knowledge := func(reader *testkit.Client) fixture {
		f := fixture{ids: kbIDs, status: []int{403, 404}, codeOK: refusalCode, callers: attackers, reader: reader}
		f.call = map[string][]func(c *testkit.Client) testkit.Response{
			"POST /api/knowledge/files/upload": {func(c *testkit.Client) testkit.Response { return c.Upload(kbID, "intruder.md", []byte("# Intruder\n")) }},
		}
		return f
	}
	notifyBody := testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "owner-bucket", Key: "docs/intruder.md", Size: 10,
		ETag: "0123456789abcdef0123456789abcdef", Sequencer: "01"})
	fixtures := map[intake.Check]fixture{
		intake.OwnThread:  chat(nil),
		intake.OwnRun:     chat(nil),
		intake.OwnRequest: chat(nil),
		intake.OwnAPIKey:  chat(nil),
		intake.OwnMessage: chat(nil),
		intake.OwnProject: chat(nil), // admin3: a project is its creator's alone
		// evalsuites: a suite is its creator's alone.
		intake.OwnSuite:       {ids: suiteIDs, status: []int{404}, codeOK: refusalCode, callers: attackers},
		intake.ReadAgent:      chat(carol),
		intake.ManageAgent:    chat(carol),
		intake.ReadKB:         knowledge(kbReader),
		intake.ManageKB:       knowledge(kbReader),
		intake.ReadDataset:    knowledge(kbReader),
		intake.ManageDataset:  knowledge(kbReader),
		intake.ReadSchedule:   knowledge(kbReader),
		intake.ManageSchedule: knowledge(kbReader),
		intake.ReadKBQuery:    graphQuery(knowledge(kbReader), kbID),
		// graphroutes: imports into the KB named in the body, refused (to
		// the KB's reader too) before anything is fetched or read.
		intake.KBInBody: kbInBody(knowledge(kbReader), kbID, kbReader),
		// admin: tasks, seen by who reads their KB, managed by who manages it.
		intake.ReadTask:   knowledge(kbReader),
		intake.ManageTask: knowledge(kbReader),
		intake.NotifyToken: {status: []int{401}, codeOK: func(code string) bool { return code == "invalid_notify_token" },
			callers: []caller{{"anonymous", bob.As(""), false}, {"a user's bearer token", bob, false}},
			call: map[string][]func(c *testkit.Client) testkit.Response{"POST /api/knowledge/notifications": {
				func(c *testkit.Client) testkit.Response {
					if c.Token == "" {
						return c.Notify(notifyBody)
					}
					return c.Notify(notifyBody, "Authorization", "Bearer "+c.Token)
				},
				func(c *testkit.Client) testkit.Response {
					return c.Notify(notifyBody, "Authorization", "Bearer "+strings.Repeat("x", len(testkit.NotifyToken)))
				},
			}}},
		// Admins manage the users of their own department (rival may manage
		// alice: it is not an attacker here); the superadmin-only routes refuse
		// every admin; a CLI login is seen by its approver only.
		intake.ManageUser: {ids: identityIDs, status: []int{404}, codeOK: refusalCode,
			callers: slices.DeleteFunc(slices.Clone(attackers), func(c caller) bool { return c.c == rival })},
		intake.Superadmin: {ids: identityIDs, status: []int{403}, codeOK: func(code string) bool { return code == "superadmin_required" },
			callers: attackers},
		intake.CLISession: {ids: identityIDs, status: []int{404}, codeOK: refusalCode, callers: attackers},
		intake.AgentsInBody: {status: []int{403, 404}, codeOK: refusalCode, callers: attackers,
			call: map[string][]func(c *testkit.Client) testkit.Response{
				"POST /api/chat/thread": {func(c *testkit.Client) testkit.Response {
					return c.Do("POST", "/api/chat/thread", map[string]any{"agent_id": agentID, "title": "pwned"})
				}},
				"POST /api/agent/runs": {
					func(c *testkit.Client) testkit.Response { // A's thread
						return c.Do("POST", "/api/agent/runs", map[string]any{"query": "pwned", "agent_slug": agentID, "thread_id": threadID})
					},
					func(c *testkit.Client) testkit.Response { // A's agent on B's own thread
						return c.Do("POST", "/api/agent/runs", map[string]any{"query": "pwned", "agent_slug": agentID, "thread_id": bobThread})
					},
					func(c *testkit.Client) testkit.Response { // a resume of A's run
						return c.Do("POST", "/api/agent/runs", map[string]any{"agent_slug": agentID, "thread_id": threadID,
							"resume": map[string]any{"answer": "pwned"}, "created_by_run_id": runID})
					},
					func(c *testkit.Client) testkit.Response { // a resume of A's run on B's own thread
						return c.Do("POST", "/api/agent/runs", map[string]any{"agent_slug": "default-chatbot", "thread_id": bobThread,
							"resume": map[string]any{"answer": "pwned"}, "created_by_run_id": runID})
					},
				},
				"POST /api/agent-invocation/agent-call/runs": {
					func(c *testkit.Client) testkit.Response { // A's agent
						return c.Do("POST", "/api/agent-invocation/agent-call/runs", map[string]any{"agent_slug": agentID, "async_mode": true,
							"messages": []map[string]any{{"role": "user", "content": "pwned"}}})
					},
					func(c *testkit.Client) testkit.Response { // A's thread
						return c.Do("POST", "/api/agent-invocation/agent-call/runs", map[string]any{"agent_slug": "default-chatbot", "async_mode": true,
							"thread_id": threadID, "messages": []map[string]any{{"role": "user", "content": "pwned"}}})
					},
				},
				"POST /api/agent-invocation/channel/messages": {
					func(c *testkit.Client) testkit.Response { // A's agent
						return c.Do("POST", "/api/agent-invocation/channel/messages", map[string]any{"agent_slug": agentID, "chat_id": "c1",
							"message": map[string]any{"text": "pwned"}})
					},
					func(c *testkit.Client) testkit.Response { // A's thread, and its state
						return c.Do("POST", "/api/agent-invocation/channel/messages", map[string]any{"agent_slug": "default-chatbot",
							"thread_id": threadID, "message": map[string]any{"text": "/state"}})
					},
				},
				"POST /api/agent-invocation/eval/runs": {
					func(c *testkit.Client) testkit.Response { // A's agent
						return c.Do("POST", "/api/agent-invocation/eval/runs", map[string]any{"agent_slug": agentID, "query": "pwned"})
					},
					func(c *testkit.Client) testkit.Response { // A's thread
						return c.Do("POST", "/api/agent-invocation/eval/runs", map[string]any{"agent_slug": "default-chatbot", "query": "pwned",
							"thread_id": threadID})
					},
				},
				"POST /v1/chat/completions": {
					func(c *testkit.Client) testkit.Response { // A's agent as the model
						return c.Do("POST", "/v1/chat/completions", map[string]any{"model": agentID,
							"messages": []map[string]any{{"role": "user", "content": "pwned"}}})
					},
					func(c *testkit.Client) testkit.Response { // A's thread
						return c.DoWith("POST", "/v1/chat/completions", map[string]any{"model": "default-chatbot",
							"messages": []map[string]any{{"role": "user", "content": "pwned"}}}, "X-Yuxi-Thread-Id", threadID)
					},
				},
			}},
		intake.ThreadInQuery:    threadQuery(attackers, threadID),
		intake.OwnWorkspace:     workspaceOwner(attackers, "alice", kbID, docID),
		intake.OwnTmpAttachment: tmpAttachment(attackers, aliceTmp),
		intake.RunInBody: {status: []int{404}, codeOK: refusalCode, callers: attackers,
			call: map[string][]func(c *testkit.Client) testkit.Response{
				"POST /api/agent-invocation/agent-call/runs/result": {func(c *testkit.Client) testkit.Response {
					return c.Do("POST", "/api/agent-invocation/agent-call/runs/result", map[string]any{"run_id": runID})
				}},
			}},
		// ext: the skill checks. A shared skill B may not read is not found;
		// its reader is refused every manage route; a draft is its creator's
		// alone; a personal skill is looked up in the caller's workspace.
		intake.ReadSkill:        {ids: skillIDs, status: []int{404}, codeOK: refusalCode, callers: attackers, reader: kbReader},
		intake.ManageSkill:      {ids: skillIDs, status: []int{404}, codeOK: refusalCode, callers: attackers, reader: kbReader},
		intake.OwnSkillDraft:    {ids: skillIDs, status: []int{404}, codeOK: refusalCode, callers: attackers},
		intake.OwnPersonalSkill: {ids: personalIDs, status: []int{404}, codeOK: refusalCode, callers: attackers},
	}

	// What A sees and what the database and object store hold of A's
	// resources, before and after B's attempts.
	ownerView := func() string {
		var b strings.Builder
		for _, g := range []struct {
			c    *testkit.Client
			path string
		}{
			{alice, "/api/chat/thread/" + threadID + "/history"}, {alice, "/api/agent/runs/" + runID + "/result"},
			{alice, "/api/agent/requests/" + requestID}, {alice, "/api/user/apikey/" + keyID}, {alice, "/api/agent/" + agentID},
			{alice, "/api/chat/threads"}, {kbOwner, "/api/knowledge/databases/" + kbID}, {kbOwner, "/api/knowledge/databases/" + kbID + "/documents"},
			{kbOwner, "/api/knowledge/databases/" + kbID + "/documents/" + docID + "/content"},
			{kbOwner, "/api/knowledge/databases/" + kbID + "/documents/" + docID + "/download"},
			{kbOwner, "/api/knowledge/databases/" + kbID + "/images/" + image}, {kbOwner, "/api/knowledge/databases/" + kbID + "/sources"},
			{kbOwner, "/api/knowledge/databases/" + kbID + "/query-params"},
			{kbOwner, "/api/system/skills/owner-skill/tree"}, {kbOwner, "/api/system/skills/owner-skill/file?path=SKILL.md"}, // ext
			{alice, "/api/skills/personal/alice-skill/file?path=SKILL.md"},
			{alice, "/api/evaluation/suites/" + suiteID}, {alice, "/api/evaluation/suites/" + suiteID + "/runs/" + suiteRunID}, // evalsuites
			{alice, "/api/evaluation/schedules/" + suiteSchedule}, {alice, "/api/evaluation/history?target=" + suiteSchedule}, // eval3
			{alice, "/api/tasks/" + suiteRunID},
		} {
			r := g.c.Do("GET", g.path, nil)
			sum := sha256.Sum256(r.Body)
			fmt.Fprintf(&b, "%s %d %s\n", g.path, r.Status, hex.EncodeToString(sum[:8]))
			if r.Status != http.StatusOK {
				t.Errorf("the owner cannot read %s: %d %s", g.path, r.Status, r.Body)
			}
		}
		return b.String()
	}
	stored := func() string {
		var rows string
		err := pool.QueryRow(ctx, `SELECT json_build_object(
			'thread', (SELECT row_to_json(c) FROM conversations c WHERE thread_id = $1),
			'messages', (SELECT json_agg(m ORDER BY m.id) FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE c.thread_id = $1),
			'run', (SELECT row_to_json(r) FROM agent_runs r WHERE id = $2),
			'request', (SELECT row_to_json(q) FROM agent_run_requests q WHERE request_id = $3),
			'key', (SELECT row_to_json(k) FROM api_keys k WHERE id = $4::bigint),
			'agent', (SELECT row_to_json(a) FROM agents a WHERE slug = $5),
			'default', (SELECT slug FROM agents WHERE is_default),
			'kb', (SELECT row_to_json(k) FROM knowledge_bases k WHERE kb_id = $6),
			'files', (SELECT json_agg(f ORDER BY f.file_id) FROM knowledge_files f WHERE kb_id = $6),
			'chunks', (SELECT json_agg(c.chunk_id ORDER BY c.chunk_id) FROM knowledge_chunks c JOIN knowledge_files f USING (file_id) WHERE f.kb_id = $6),
			'images', (SELECT json_agg(i ORDER BY i.object_key) FROM knowledge_images i WHERE kb_id = $6),
			'sources', (SELECT json_agg(s ORDER BY s.id) FROM knowledge_sources s WHERE kb_id = $6),
			'counts', (SELECT json_build_object('conversations', (SELECT count(*) FROM conversations), 'messages', (SELECT count(*) FROM messages),
				'runs', (SELECT count(*) FROM agent_runs), 'requests', (SELECT count(*) FROM agent_run_requests), 'agents', (SELECT count(*) FROM agents),
				'api_keys', (SELECT count(*) FROM api_keys), 'kbs', (SELECT count(*) FROM knowledge_bases), 'files', (SELECT count(*) FROM knowledge_files),
				'sources', (SELECT count(*) FROM knowledge_sources), 'outbox', (SELECT count(*) FROM outbox),
				'feedbacks', (SELECT json_agg(f ORDER BY f.id) FROM message_feedbacks f), 'projects', (SELECT count(*) FROM projects),
				'viewed', (SELECT last_viewed_run_id FROM conversations WHERE thread_id = $1))),
			'skills', (SELECT json_agg(s ORDER BY s.slug) FROM skills s WHERE s.created_by IN ('kb-owner', 'alice')),
			'skill_drafts', (SELECT json_agg(d ORDER BY d.id) FROM skill_drafts d WHERE d.created_by IN ('kb-owner', 'alice')))::text`,
			threadID, runID, requestID, keyID, agentID, kbID).Scan(&rows)
		if err != nil {
			t.Fatal(err)
		}
		var objs []string
		_ = filepath.WalkDir(p.BlobDir, func(path string, d fs.DirEntry, err error) error {
			// B's own skill drafts are B's (A's pending draft is compared).
			if err == nil && !d.IsDir() && (!strings.Contains(path, "skill-drafts") || strings.Contains(path, pendingDraft)) {
				if info, err := os.Stat(path); err == nil {
					objs = append(objs, fmt.Sprintf("%s %d %d", strings.TrimPrefix(path, p.BlobDir), info.Size(), info.ModTime().UnixNano()))
				}
			}
			return nil
		})
		sort.Strings(objs)
		return rows + "\n" + strings.Join(objs, "\n")
	}
	viewBefore, storedBefore := ownerView(), stored()
	identityStored := func() string {
		var out string
		if err := pool.QueryRow(ctx, `SELECT json_build_object(
			'alice', (SELECT row_to_json(u) FROM users u WHERE uid = 'alice'),
			'config', (SELECT row_to_json(c) FROM user_config c JOIN users u ON u.id = c.user_id WHERE u.uid = 'alice'),
			'env', (SELECT row_to_json(e) FROM agent_envs e JOIN users u ON u.id = e.user_id WHERE u.uid = 'alice'),
			'cli', (SELECT json_agg(s ORDER BY s.id) FROM cli_auth_sessions s),
			'departments', (SELECT json_agg(d ORDER BY d.id) FROM departments d),
			'users', (SELECT count(*) FROM users), 'impersonations', (SELECT count(*) FROM impersonation_audit))::text`).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	identityBefore := identityStored()

	routes := intake.New(intake.Deps{KBs: &kb.Store{}, Skills: &skill.Service{}, Budgets: &budget.Service{}, MCP: &mcp.Toolset{}}).Routes()
	walked := map[intake.Check]int{} // the key "(lists: no check)" counts the read routes without a check
	calls := 0
	refused := func(f fixture, who, what string, r testkit.Response) {
		t.Helper()
		calls++
		if !slices.Contains(f.status, r.Status) || !f.codeOK(r.Code()) {
			t.Errorf("HOLE? %s: %s: %d %s, want %v with an error code", who, what, r.Status, r.Body, f.status)
		}
	}
	for _, rt := range routes {
		ps := params(rt.Path)
		// The table's Check column must be truthful where a test can tell.
		if rt.Check == intake.NoCheck {
			for _, name := range ps {
				if _, ok := unscopedParams[name]; !ok && !unscopedPath(rt.Path) {
					t.Errorf("route %s takes {%s} but declares no resource check", rt.Pattern(), name)
				}
			}
			// Lists and other reads without a check answer B with nothing of A's.
			if rt.Method == "GET" && rt.Access != intake.Public {
				path, _ := fill(rt.Path, map[string]string{"backend_id": agent.BackendChatbot, "uid": "alice", "provider_id": "fake", "slug": "fixture"})
				path += listQuery[rt.Pattern()]
				walked["(lists: no check)"]++
				for _, b := range attackers {
					if !b.admin && (rt.Access == intake.Admin || rt.Access == intake.SuperAdmin) {
						continue
					}
					r := b.c.Do("GET", path, nil)
					calls++
					if r.Status != http.StatusOK {
						t.Errorf("%s: GET %s: %d %s", b.name, path, r.Status, r.Body)
					}
					for _, secret := range secrets {
						if strings.Contains(string(r.Body), secret) {
							t.Errorf("HOLE: %s: GET %s answers with A's %q: %s", b.name, path, secret, r.Body)
						}
					}
				}
			}
			continue
		}
		if want, ok := checkParam[rt.Check]; ok && !slices.Contains(ps, want) && !(rt.Check == intake.ManageKB && rt.Path == "/api/knowledge/files/upload") {
			t.Errorf("route %s declares %s but has no {%s}", rt.Pattern(), rt.Check, want)
		}
		if (rt.Check == intake.ReadAgent || rt.Check == intake.ReadKB) && rt.Method != "GET" {
			if _, ok := readOnlyWrites[rt.Pattern()]; !ok {
				t.Errorf("route %s changes state with only a read check (%s)", rt.Pattern(), rt.Check)
			}
		}
		f, ok := fixtures[rt.Check]
		if !ok {
			t.Errorf("route %s: no fixture for check %q; add one to the two-account suite", rt.Pattern(), rt.Check)
			continue
		}
		walked[rt.Check]++
		reqs := f.call[rt.Pattern()]
		if len(reqs) == 0 {
			if rt.Check == intake.NotifyToken || rt.Check == intake.AgentsInBody || rt.Check == intake.RunInBody {
				t.Errorf("route %s: check %s needs a request of its own in the fixture", rt.Pattern(), rt.Check)
				continue
			}
			path, missing := fill(rt.Path, f.ids)
			if len(missing) > 0 {
				t.Errorf("route %s: the %s fixture has no id for %v", rt.Pattern(), rt.Check, missing)
				continue
			}
			reqs = []func(c *testkit.Client) testkit.Response{func(c *testkit.Client) testkit.Response { return c.Do(rt.Method, path, hostile) }}
			// B's own KB with A's document, folder, source or image: the
			// sub-resource must be checked against the KB in the path.
			if (rt.Check == intake.ReadKB || rt.Check == intake.ManageKB) && len(ps) > 1 {
				mixed, _ := fill(rt.Path, map[string]string{"kb_id": rivalKB, "doc_id": docID, "file_id": docID, "folder_id": folderID,
					"source_id": sourceID, "object_path": image, "dataset_id": datasetID, "run_id": evalRunID})
				mf := f
				if slices.Contains(ps, "object_path") {
					// An object key outside the KB in the path is refused as
					// malformed before any lookup: the answer is the same
					// whether A's image exists or not.
					mf.status = []int{400, 404}
					mf.codeOK = func(code string) bool { return code == "invalid_image_path" || refusalCode(code) }
				}
				refused(mf, "admin of A's department with its own KB", rt.Method+" "+mixed, rival.Do(rt.Method, mixed, hostile))
			}
		}
		for _, b := range f.callers {
			if (!b.admin && rt.Access == intake.Admin) || rt.Access == intake.SuperAdmin {
				continue // refused by role; route_table_test proves it (no attacker is a superadmin)
			}
			for i, call := range reqs {
				refused(f, b.name, fmt.Sprintf("%s #%d", rt.Pattern(), i), call(b.c))
			}
		}
		// A reader is served every read route and refused every manage route.
		if f.reader != nil && len(f.call[rt.Pattern()]) == 0 {
			path, _ := fill(rt.Path, f.ids)
			switch {
			case rt.Check == intake.ManageAgent || rt.Check == intake.ManageKB || rt.Check == intake.ManageDataset || rt.Check == intake.ManageSchedule ||
				rt.Check == intake.ManageTask || rt.Check == intake.ManageSkill:
				r := f.reader.Do(rt.Method, path, hostile)
				calls++
				if r.Status != http.StatusForbidden || !strings.HasSuffix(r.Code(), "_manage_forbidden") {
					t.Errorf("reader: %s %s: %d %s, want 403 *_manage_forbidden", rt.Method, path, r.Status, r.Body)
				}
			case rt.Method == "GET" && !strings.HasSuffix(rt.Path, "/events") && (rt.Access == intake.User || rt.Check == intake.ReadKB || rt.Check == intake.ReadDataset || rt.Check == intake.ReadSchedule ||
				rt.Check == intake.ReadTask):
				path += readerQuery[rt.Pattern()]
				if r := f.reader.Do(rt.Method, path, nil); r.Status != http.StatusOK {
					t.Errorf("reader: %s %s: %d %s, want 200 (the route declares only a read check)", rt.Method, path, r.Status, r.Body)
				}
			}
		}
	}
	// B's own KB with A's ids in the body: each id is checked against the KB
	// in the path (refused as not found there, or as an item not uploaded to it).
	rivalBase := "/api/knowledge/databases/" + rivalKB
	for _, call := range []struct {
		method, path string
		body         map[string]any
	}{
		{"POST", rivalBase + "/documents", map[string]any{"items": []string{pendingUpload}}},
		{"POST", rivalBase + "/documents/add", map[string]any{"items": []string{pendingUpload}}},
		{"POST", rivalBase + "/documents/parse", map[string]any{"file_ids": []string{docID}}},
		{"POST", rivalBase + "/documents/index", map[string]any{"file_ids": []string{docID}}},
		{"DELETE", rivalBase + "/documents/batch", map[string]any{"file_ids": []string{docID}}},
		{"POST", rivalBase + "/folders", map[string]any{"folder_name": "pwned", "parent_id": folderID}},
		{"PUT", rivalBase + "/documents/" + rivalFolder + "/move", map[string]any{"new_parent_id": folderID}},
		{"POST", "/api/evaluation/databases/" + rivalKB + "/runs", map[string]any{"dataset_id": datasetID}},
		{"POST", "/api/evaluation/schedules", map[string]any{"kb_id": rivalKB, "cron": "0 3 * * *", "dataset_id": datasetID}},
		{"POST", "/api/evaluation/schedules", map[string]any{"kb_id": kbID, "cron": "0 3 * * *", "dataset_id": datasetID}},
	} {
		r := rival.Do(call.method, call.path, call.body)
		calls++
		if (r.Status != 404 || !refusalCode(r.Code())) && (r.Status != 422 || r.Code() != "invalid_items") {
			t.Errorf("HOLE? admin with its own KB naming A's ids in the body: %s %s: %d %s", call.method, call.path, r.Status, r.Body)
		}
	}
	// eval3: a suite's schedules, history and task are its owner's (a plain
	// user's here: the schedule, history and task reads are user routes);
	// RAG schedules and history stay admin work.
	for _, b := range attackers {
		for _, call := range []struct{ method, path string }{
			{"GET", "/api/evaluation/schedules/" + suiteSchedule}, {"PUT", "/api/evaluation/schedules/" + suiteSchedule},
			{"DELETE", "/api/evaluation/schedules/" + suiteSchedule}, {"GET", "/api/evaluation/history?target=" + suiteSchedule},
			{"GET", "/api/evaluation/history?target=" + suiteID}, {"GET", "/api/tasks/" + suiteRunID},
		} {
			r := b.c.Do(call.method, call.path, map[string]any{"cron": "* * * * *", "enabled": false, "name": "pwned"})
			calls++
			if r.Status != 404 || !refusalCode(r.Code()) {
				t.Errorf("HOLE? %s: %s %s (A's suite): %d %s", b.name, call.method, call.path, r.Status, r.Body)
			}
		}
		if b.admin {
			continue
		}
		for _, call := range []struct {
			method, path string
			body         map[string]any
		}{
			{"POST", "/api/evaluation/schedules", map[string]any{"kb_id": kbID, "cron": "0 3 * * *", "dataset_id": datasetID}},
			{"GET", "/api/evaluation/history?target=" + kbID, nil},
		} {
			r := b.c.Do(call.method, call.path, call.body)
			calls++
			if r.Status != http.StatusForbidden || r.Code() != "admin_required" {
				t.Errorf("HOLE? %s: %s %s (RAG evaluation): %d %s", b.name, call.method, call.path, r.Status, r.Body)
			}
		}
	}
	if r := alice.Do("POST", "/api/evaluation/schedules", map[string]any{"kb_id": kbID, "cron": "0 3 * * *", "dataset_id": datasetID}); r.Status != http.StatusForbidden {
		t.Errorf("a plain user schedules a RAG evaluation: %d %s", r.Status, r.Body)
	}
	// An API key for A, minted by B: only a superadmin mints keys for others.
	for i, b := range attackers {
		r := b.c.Do("POST", "/api/user/apikey", map[string]any{"request_id": fmt.Sprintf("for-alice-%d", i), "name": "pwned", "user_id": aliceUserID})
		calls++
		if r.Status != http.StatusForbidden || r.Code() != "api_key_forbidden" {
			t.Errorf("HOLE? %s mints an API key for A: %d %s", b.name, r.Status, r.Body)
		}
	}

	// ext: the skill routes without a check, called by every account. B's
	// upload is B's own draft; a batch delete naming A's skills deletes
	// nothing; a remote source off the allow-list is refused before any
	// fetch; remote search is not configured; an admin may sync built-ins.
	for _, b := range append([]caller{{"owner", alice, false}, {"owner (admin)", kbOwner, true}}, attackers...) {
		if b.c != alice && b.c != kbOwner {
			if r := b.c.PostFile("/api/skills/import/prepare", "SKILL.md", skillMD("intruder-skill", "pwned")); r.Status != http.StatusOK {
				t.Errorf("%s: prepare its own skill: %d %s", b.name, r.Status, r.Body)
			}
			r := b.c.Do("POST", "/api/system/skills/delete-batch", map[string]any{"slugs": []string{"owner-skill", "alice-skill"}})
			calls++
			if r.Status != http.StatusOK || r.JSON()["summary"].(map[string]any)["success"] != float64(0) {
				t.Errorf("HOLE? %s batch-deletes A's skills: %d %s", b.name, r.Status, r.Body)
			}
		}
		for _, route := range []string{"/api/skills/remote/list", "/api/skills/remote/prepare"} {
			r := b.c.Do("POST", route, map[string]any{"source": "https://skills.invalid/owner/repo.zip", "skills": []string{"x"}})
			calls++
			if (r.Status != 403 || r.Code() != "remote_source_forbidden") && (r.Status != 503 || r.Code() != "remote_skills_disabled") {
				t.Errorf("%s: POST %s off the allow-list: %d %s", b.name, route, r.Status, r.Body)
			}
		}
		if r := b.c.Do("POST", "/api/skills/remote/search", map[string]any{"query": "okapi"}); r.Status != 422 || r.Code() != "remote_search_not_configured" {
			t.Errorf("%s: remote search: %d %s", b.name, r.Status, r.Body)
		}
		for _, route := range []string{"/api/skills", "/api/skills/accessible", "/api/system/skills", "/api/system/skills/dependency-options"} {
			if r := b.c.Do("GET", route, nil); r.Status != http.StatusOK {
				t.Errorf("%s: GET %s: %d %s", b.name, route, r.Status, r.Body)
			}
		}
		if b.admin {
			if r := b.c.Do("GET", "/api/system/skills/builtin", nil); r.Status != http.StatusOK {
				t.Errorf("%s: GET builtin skills: %d %s", b.name, r.Status, r.Body)
			}
			if r := b.c.Do("POST", "/api/system/skills/builtin/sync", nil); r.Status != http.StatusOK {
				t.Errorf("%s: sync builtin skills: %d %s", b.name, r.Status, r.Body)
			}
		}
	}

	// ext: token budgets are the superadmin's: every other account, admins
	// included, is refused both routes.
	for _, b := range append([]caller{{"owner", alice, false}, {"owner (admin)", kbOwner, true}}, attackers...) {
		for _, m := range []string{"GET", "PUT"} {
			r := b.c.Do(m, "/api/system/token-budgets", map[string]any{"scope": "user", "subject": "alice", "limit_tokens": 0})
			calls++
			if r.Status != http.StatusForbidden || r.Code() != "superadmin_required" {
				t.Errorf("HOLE? %s: %s token budgets: %d %s", b.name, m, r.Status, r.Body)
			}
		}
	}
	// Key rotation is the superadmin's too: nobody else re-seals the stored secrets.
	for _, b := range append([]caller{{"owner", alice, false}, {"owner (admin)", kbOwner, true}}, attackers...) {
		r := b.c.Do("POST", "/api/system/secrets/reseal", nil)
		calls++
		if r.Status != http.StatusForbidden || r.Code() != "superadmin_required" {
			t.Errorf("HOLE? %s: secrets reseal: %d %s", b.name, r.Status, r.Body)
		}
	}

	// ext3: MCP servers are instance-wide: every admin operates them (as the
	// original), users see only the redacted list, and the headers are
	// never answered (the lists above checked the admin views too).
	mcpBase := "/api/system/mcp-servers/fixture"
	wantToolCalls := int64(0) // only the test-call route calls a tool
	for i, b := range append([]caller{{"owner", alice, false}, {"owner (admin)", kbOwner, true}}, attackers...) {
		if !b.admin {
			r := b.c.Do("GET", "/api/system/mcp-servers", nil)
			calls++
			if r.Status != http.StatusOK || strings.Contains(string(r.Body), fx.URL) || strings.Contains(string(r.Body), "X-Fixture-Key") ||
				!strings.Contains(string(r.Body), `"slug":"fixture"`) {
				t.Errorf("HOLE? %s: the MCP server list is not redacted: %d %s", b.name, r.Status, r.Body)
			}
			continue
		}
		for _, call := range []struct {
			method, path string
			body         map[string]any
			want         string
		}{
			{"POST", mcpBase + "/test", nil, `"tool_count":2`},
			{"POST", mcpBase + "/tools/refresh", nil, `"tool_count":2`},
			{"PUT", mcpBase + "/tools/add/toggle", nil, `"success":true`},
			{"PUT", mcpBase + "/tools/add/toggle", nil, `"success":true`},
			{"POST", mcpBase + "/tools/add/call", map[string]any{"arguments": map[string]any{"a": 2, "b": 3}}, `"text":"The sum of 2 and 3 is 5."`},
			{"PUT", mcpBase + "/status", map[string]any{"enabled": false}, `"enabled":false`},
			{"PUT", mcpBase + "/status", map[string]any{"enabled": true}, `"enabled":true`},
			{"PUT", mcpBase, map[string]any{"description": "set by " + b.name}, `"description":"set by ` + b.name + `"`},
			{"POST", "/api/system/mcp-servers", map[string]any{"name": fmt.Sprintf("fixture-%d", i), "transport": "streamable_http", "url": fx.URL},
				fmt.Sprintf(`"slug":"fixture-%d"`, i)},
			{"DELETE", fmt.Sprintf("/api/system/mcp-servers/fixture-%d", i), nil, `"success":true`},
		} {
			r := b.c.Do(call.method, call.path, call.body)
			calls++
			if strings.HasSuffix(call.path, "/call") {
				wantToolCalls++
			}
			if r.Status != http.StatusOK || !strings.Contains(string(r.Body), call.want) || strings.Contains(string(r.Body), mcpHeaderSecret) {
				t.Errorf("%s: %s %s: %d %s, want 200 with %s", b.name, call.method, call.path, r.Status, r.Body, call.want)
			}
		}
	}
	if d := super.OK("GET", mcpBase, nil)["data"].(map[string]any); d["has_headers"] != true || len(d["disabled_tools"].([]any)) != 0 || d["enabled"] != true {
		t.Errorf("the MCP server after the admins' operations: %v", d)
	}
	if n := fx.Calls.Load(); n != wantToolCalls {
		t.Errorf("administration routes called a tool of the MCP server %d times, want %d (the test calls only)", n, wantToolCalls)
	}

	// Every role meets every route's role rule: anonymous callers get 401
	// and callers below the route's role 403 *_required, before any
	// handler runs (route_table_test checks the same with a bare server).
	anon := bob.As("")
	anon.HTTP = cover.client("anonymous")
	for _, rt := range routes {
		if rt.Access == intake.Public {
			continue
		}
		all := map[string]string{"backend_id": agent.BackendChatbot, "uid": "alice", "key": "fast_model", "provider_id": "fake", "tool_name": "add"}
		for _, m := range []map[string]string{identityIDs, chatIDs, kbIDs, skillIDs, {"suite_id": suiteID}} {
			maps.Copy(all, m)
		}
		path, missing := fill(rt.Path, all)
		if len(missing) > 0 {
			t.Errorf("route %s: no id for %v", rt.Pattern(), missing)
		}
		r := anon.Do(rt.Method, path, hostile)
		calls++
		if r.Status != http.StatusUnauthorized || r.Code() == "" {
			t.Errorf("anonymous: %s %s: %d %s, want 401 with a code", rt.Method, path, r.Status, r.Body)
		}
		for _, b := range attackers {
			if (rt.Access == intake.Admin && !b.admin) || (rt.Access == intake.SuperAdmin && !b.admin) {
				r := b.c.Do(rt.Method, path, hostile)
				calls++
				if r.Status != http.StatusForbidden || !strings.HasSuffix(r.Code(), "_required") {
					t.Errorf("%s: %s %s: %d %s, want 403 *_required", b.name, rt.Method, path, r.Status, r.Body)
				}
			}
		}
	}
	// A's identity resources as they were: B's refused calls changed nothing.
	if after := identityStored(); after != identityBefore {
		t.Errorf("B's refused calls changed A's identity rows:\nbefore: %s\nafter:  %s", identityBefore, after)
	}
	if r := rival.Do("GET", "/api/auth/users/"+fmt.Sprint(aliceUserID), nil); r.Status != http.StatusOK {
		t.Errorf("the admin of A's department cannot read A: %d %s", r.Status, r.Body)
	}
	// The owner reads every read route of its resources; every other
	// account changes its own settings, and A's stay as they were (checked
	// by identityStored above and below).
	for _, rt := range routes {
		owner := map[intake.Check]*testkit.Client{intake.OwnSuite: alice, intake.OwnThread: alice, intake.OwnRun: alice, intake.OwnRequest: alice, intake.OwnMessage: alice,
			intake.OwnAPIKey: alice, intake.ReadAgent: alice, intake.ManageAgent: alice, intake.ReadKB: kbOwner, intake.ManageKB: kbOwner,
			intake.ReadTask: kbOwner, intake.ReadSkill: kbOwner, intake.OwnPersonalSkill: alice}[rt.Check] // admin: ReadTask; ext: skills
		if owner == nil || rt.Method != "GET" || strings.HasSuffix(rt.Path, "/events") {
			continue
		}
		ids := map[string]string{"thread_id": threadID, "run_id": runID, "request_id": requestID, "api_key_id": keyID, "message_id": messageID,
			"agent_id": agentID, "kb_id": kbID, "doc_id": docID, "file_id": docID, "folder_id": folderID, "source_id": sourceID, "object_path": image,
			"path": "uploads/alice-brief.txt"}
		if owner == kbOwner {
			ids = kbIDs // a KB's run_id is an evaluation run's
		}
		switch rt.Check {
		case intake.ReadSkill:
			ids = skillIDs
		case intake.OwnPersonalSkill:
			ids = personalIDs
		case intake.OwnSuite: // evalsuites: a suite's run_id is a suite run's
			ids = suiteIDs
		}
		path, _ := fill(rt.Path, ids)
		path += readerQuery[rt.Pattern()]
		if r := owner.Do("GET", path, nil); r.Status != http.StatusOK {
			t.Errorf("owner: GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	for i, b := range attackers {
		b.c.OK("PUT", "/api/user/config", map[string]any{"enable_memory": i%2 == 0})
		b.c.OK("PUT", "/api/user/agent-env", map[string]any{"env": map[string]any{"ALICE_TOKEN": "pwned"}})
		if env := b.c.OK("GET", "/api/user/agent-env", nil)["env"].(map[string]any); env["ALICE_TOKEN"] != "pwned" {
			t.Errorf("%s reads another environment: %v", b.name, env)
		}
	}
	if after := identityStored(); after != identityBefore {
		t.Errorf("other accounts' own settings changed A's:\nbefore: %s\nafter:  %s", identityBefore, after)
	}
	if env := alice.OK("GET", "/api/user/agent-env", nil)["env"].(map[string]any); env["ALICE_TOKEN"] != "alice-env-secret" {
		t.Errorf("A's environment changed: %v", env)
	}

	for check := range fixtures {
		if walked[check] == 0 {
			t.Errorf("fixture %q matches no route of the table", check)
		}
	}
	kinds := make([]string, 0, len(walked))
	for c, n := range walked {
		kinds = append(kinds, fmt.Sprintf("%s=%d", c, n))
	}
	sort.Strings(kinds)
	t.Logf("routes walked per check: %s; %d refused calls checked", strings.Join(kinds, " "), calls)

	testkit.WaitKnowledgeSettled(t, pool, bucketSettle)
	if after := stored(); after != storedBefore {
		t.Errorf("B's refused calls changed A's stored resources:\nbefore: %s\nafter:  %s", storedBefore, after)
	}
	if after := ownerView(); after != viewBefore {
		t.Errorf("A's view of its resources changed:\nbefore:\n%safter:\n%s", viewBefore, after)
	}

	// ext: the owners pass every skill route that changes state (after the
	// comparisons above, which these change).
	sk := "/api/system/skills/owner-skill"
	kbOwner.OK("PUT", sk+"/share-config", map[string]any{"share_config": ownerSkillShare})
	kbOwner.OK("PUT", sk+"/enabled", map[string]any{"enabled": true})
	kbOwner.OK("POST", sk+"/file", map[string]any{"path": "notes.md", "content": "first"})
	kbOwner.OK("PUT", sk+"/file", map[string]any{"path": "notes.md", "content": "second"})
	if f := kbOwner.OK("GET", sk+"/file?path=notes.md", nil)["data"].(map[string]any); f["content"] != "second" {
		t.Errorf("owner's skill file after update: %v", f)
	}
	kbOwner.OK("PUT", sk+"/dependencies", map[string]any{"tool_dependencies": []string{}, "mcp_dependencies": []string{}, "skill_dependencies": []string{}})
	kbOwner.OK("DELETE", sk+"/file?path=notes.md", nil)
	installed(kbOwner.OK("POST", "/api/skills/install-drafts/"+pendingDraft+"/confirm", map[string]any{"share_config": ownerSkillShare}), 1)
	installed(kbOwner.OK("POST", "/api/system/skills/delete-batch", map[string]any{"slugs": []string{"owner-pending-skill"}}), 1)
	kbOwner.OK("DELETE", "/api/skills/install-drafts/"+prepareSkill(kbOwner, "owner-discarded-skill", "discarded"), nil)
	kbOwner.OK("DELETE", sk, nil)
	alice.OK("DELETE", "/api/skills/personal/alice-skill", nil)
	if r := kbOwner.Do("GET", sk+"/tree", nil); r.Status != http.StatusNotFound {
		t.Errorf("deleted shared skill: %d %s", r.Status, r.Body)
	}
	if r := alice.Do("GET", "/api/skills/personal/alice-skill/file?path=SKILL.md", nil); r.Status != http.StatusNotFound {
		t.Errorf("deleted personal skill: %d %s", r.Status, r.Body)
	}

	// admin3: A's project folder survived B's attempts; A's delete removes it.
	projectScope := sandbox.Scope{UID: "alice"}
	if _, err := sb.Client.Stat(ctx, projectScope, sandbox.ProjectDir(projectID)); err != nil {
		t.Errorf("alice's project folder: %v", err)
	}
	alice.OK("DELETE", "/api/projects/"+projectID, nil)
	if _, err := sb.Client.Stat(ctx, projectScope, sandbox.ProjectDir(projectID)); !sandbox.IsCode(err, "not_found") {
		t.Errorf("deleted project's folder: %v", err)
	}

	// ext3: an admin deletes the MCP server (last: the routes above used it).
	outsider.OK("DELETE", mcpBase, nil)
	if r := super.Do("GET", mcpBase, nil); r.Status != http.StatusNotFound || r.Code() != "mcp_server_not_found" {
		t.Errorf("deleted MCP server: %d %s", r.Status, r.Body)
	}

	covered, total, missing := cover.summary()
	t.Logf("route×role pairs called: %d of %d (%d routes × %d roles); never called: %d", covered, total, len(routes), len(suiteRoles), len(missing))
	for _, m := range missing {
		t.Logf("  not called: %s", m)
	}
}

// graphQuery is the fixture of the ?kb_id= routes (/api/graph/*): each is
// called with A's knowledge base in the query.
func graphQuery(f fixture, kbID string) fixture {
	f.call = map[string][]func(c *testkit.Client) testkit.Response{}
	for _, p := range []string{"/api/graph/subgraph", "/api/graph/labels", "/api/graph/stats"} {
		f.call["GET "+p] = []func(c *testkit.Client) testkit.Response{
			func(c *testkit.Client) testkit.Response { return c.Do("GET", p+"?kb_id="+kbID, nil) },
		}
	}
	return f
}
