package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Issue 9, finding 1: binding a bucket needs proof. On main, an admin of
// another department could bind department A's bucket to a KB of its own,
// and A's next notification created files in both KBs, read with the
// platform's credential. Now a binding receives notifications only after
// its binder wrote the binding's token to its verification object, which
// needs write access to the bucket.
func TestProbeBucketBindingNeedsProof(t *testing.T) {
	t.Parallel()
	s3 := testkit.NewFakeS3(t)
	p := testkit.StartLocal(t, s3.SourceEnv())
	var otherDept int64
	if err := p.P.App.Pool.QueryRow(t.Context(), `INSERT INTO departments (name) VALUES ('rivals') RETURNING id`).Scan(&otherDept); err != nil {
		t.Fatal(err)
	}
	owner := p.Admin.For(t)
	rival := p.Admin.CreateUser("rival", "admin", &otherDept).For(t)
	drop := s3.Bucket(t, "acme-private")

	mine := newBucketKB(t, p, s3, "ours", "s3", "acme-private", "docs/")
	theirsID := rival.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "theirs", "description": "x"})["kb_id"].(string)
	base := "/api/knowledge/databases/" + theirsID + "/sources"
	src := rival.OK("POST", base, map[string]any{"provider": "s3", "bucket": "acme-private", "prefix": "docs/"})
	if src["verified_at"] != nil || src["verification_token"] == "" {
		t.Fatalf("a new binding is verified without proof: %v", src)
	}
	// The rival cannot write to the bucket, so verification fails.
	r := rival.Do("POST", fmt.Sprintf("%s/%v/verify", base, src["id"]), nil)
	if r.Status != 422 || r.Code() != "source_unverified" {
		t.Fatalf("verify without the object: %d %s", r.Status, r.Body)
	}
	// A verification object without the binding's token proves nothing.
	if _, err := drop.Put(t.Context(), src["verification_key"].(string), strings.NewReader("not the token"), 13, "text/plain"); err != nil {
		t.Fatal(err)
	}
	if r := rival.Do("POST", fmt.Sprintf("%s/%v/verify", base, src["id"]), nil); r.Status != 422 || r.Code() != "source_unverified" {
		t.Fatalf("verify with a wrong token: %d %s", r.Status, r.Body)
	}
	// The owner's binding is verified; the rival cannot act on it (not its KB).
	list := owner.OK("GET", "/api/knowledge/databases/"+mine.kbID+"/sources", nil)
	ours, _ := list["sources"].([]any)
	if len(ours) != 1 || ours[0].(map[string]any)["verified_at"] == nil {
		t.Fatalf("owner's sources: %v", list)
	}
	if r := rival.Do("POST", fmt.Sprintf("/api/knowledge/databases/%s/sources/%v/verify", mine.kbID, ours[0].(map[string]any)["id"]), nil); r.Status != 404 {
		t.Fatalf("the rival verifies the owner's binding: %d %s", r.Status, r.Body)
	}

	// A notification for the bucket reaches the verified binding only.
	const key = "docs/plan.md"
	v := bucketPut(t, drop, key, "# Plan\n\nThe merger closes in March.\n")
	bucketNotify(t, p, testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-private", Key: key, Size: v.Size, ETag: v.ETag, Sequencer: "0B01"}))
	mine.indexed("s3://acme-private/" + key)
	if files := rival.KBFiles(theirsID); len(files) != 0 {
		t.Fatalf("HOLE: the rival's unverified binding ingested the owner's object: %v", files)
	}
}
