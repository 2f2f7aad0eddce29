package blob_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/blob/blobtest"
)

// The S3 engine is tested against gofakes3, a real S3 wire-protocol server
// (XML bodies, SigV4 headers, multipart uploads), not a mock of minio-go: in
// this process for the suite, and in a child process for the memory bound
// (an in-process server's storage shares the test's heap). The fakes speak
// HTTPS, as AWS and GCS do: over plain HTTP minio-go signs bodies in
// aws-chunked streams, which gofakes3 decodes for single PUTs
// (TestS3PlainHTTP) but not for multipart parts. With MINIO_ENDPOINT,
// MINIO_ACCESS_KEY and MINIO_SECRET_KEY set, the suite also runs against
// that server (MINIO_USE_SSL, MINIO_BUCKET, MINIO_REGION optional).

// fakeS3ChildEnv makes the test binary serve gofakes3 instead of running
// tests (see TestMain).
const fakeS3ChildEnv = "YUXI_BLOB_FAKES3_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(fakeS3ChildEnv) == "1" {
		serveFakeS3Child()
		return
	}
	os.Exit(m.Run())
}

// serveFakeS3Child prints "<url> <base64 DER certificate>" and serves until
// stdin closes.
func serveFakeS3Child() {
	srv := httptest.NewTLSServer(gofakes3.New(s3mem.New()).Server())
	fmt.Println(srv.URL, base64.StdEncoding.EncodeToString(srv.Certificate().Raw))
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// fakeS3 is a running gofakes3 server.
type fakeS3 struct {
	endpoint  string // host:port
	transport http.RoundTripper
	ssl       bool
}

// fakeS3InProcess starts gofakes3 on an httptest TLS server.
func fakeS3InProcess(t *testing.T) fakeS3 {
	t.Helper()
	srv := httptest.NewTLSServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	return fakeS3{endpoint: strings.TrimPrefix(srv.URL, "https://"), transport: srv.Client().Transport, ssl: true}
}

// fakeS3PlainHTTP starts gofakes3 on a plain-HTTP httptest server.
func fakeS3PlainHTTP(t *testing.T) fakeS3 {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	return fakeS3{endpoint: strings.TrimPrefix(srv.URL, "http://")}
}

// fakeS3Child starts gofakes3 in a child process (this test binary, see
// TestMain) and trusts the certificate it reports.
func fakeS3Child(t *testing.T) fakeS3 {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fakeS3ChildEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close() // the child stops serving
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("fake S3 child: %v", err)
	}
	url, certB64, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		t.Fatalf("fake S3 child said %q", line)
	}
	der, err := base64.StdEncoding.DecodeString(certB64)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return fakeS3{
		endpoint:  strings.TrimPrefix(url, "https://"),
		transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		ssl:       true,
	}
}

var storeSeq atomic.Int64

// s3Factory returns stores in one bucket, each under its own prefix, so
// every subtest starts empty; cleanup deletes what a subtest left behind.
func s3Factory(base blob.S3Config) func(t *testing.T) blob.Store {
	run := randomID()
	return func(t *testing.T) blob.Store {
		t.Helper()
		cfg := base
		cfg.Prefix = fmt.Sprintf("blobtest-%s/%d", run, storeSeq.Add(1))
		s, err := blob.NewS3(cfg)
		if err != nil {
			t.Fatalf("NewS3: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			list, err := s.List(ctx, "")
			if err != nil {
				t.Logf("cleanup list: %v", err)
				return
			}
			for _, in := range list {
				if err := s.Delete(ctx, in.Key); err != nil {
					t.Logf("cleanup delete %s: %v", in.Key, err)
				}
			}
		})
		return s
	}
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func fakeConfig(f fakeS3) blob.S3Config {
	return blob.S3Config{
		Endpoint:     f.endpoint,
		Region:       "us-east-1",
		AccessKey:    "test-access-key",
		SecretKey:    "test-secret-key",
		Bucket:       "yuxi-blobtest",
		UseSSL:       f.ssl,
		PathStyle:    true,
		CreateBucket: true,
		Transport:    f.transport,
	}
}

func TestS3Contract(t *testing.T) {
	// The in-process server holds objects in this heap: content is checked,
	// the memory bound is checked by TestS3ContractServerInChildProcess.
	blobtest.Run(t, s3Factory(fakeConfig(fakeS3InProcess(t))), blobtest.HeapBound(0))
}

func TestS3ContractServerInChildProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the in-process S3 contract run covers behaviour")
	}
	blobtest.Run(t, s3Factory(fakeConfig(fakeS3Child(t))))
}

func TestS3ContractMinIO(t *testing.T) {
	endpoint, access, secret := os.Getenv("MINIO_ENDPOINT"), os.Getenv("MINIO_ACCESS_KEY"), os.Getenv("MINIO_SECRET_KEY")
	if endpoint == "" || access == "" || secret == "" {
		t.Skip("MINIO_ENDPOINT, MINIO_ACCESS_KEY and MINIO_SECRET_KEY are not all set")
	}
	ssl, _ := strconv.ParseBool(os.Getenv("MINIO_USE_SSL"))
	bucket := os.Getenv("MINIO_BUCKET")
	if bucket == "" {
		bucket = "yuxi-blobtest"
	}
	region := os.Getenv("MINIO_REGION")
	if region == "" {
		region = "us-east-1"
	}
	blobtest.Run(t, s3Factory(blob.S3Config{
		Endpoint:     strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://"),
		Region:       region,
		AccessKey:    access,
		SecretKey:    secret,
		Bucket:       bucket,
		UseSSL:       ssl || strings.HasPrefix(endpoint, "https://"),
		PathStyle:    true,
		CreateBucket: true,
	}))
}

func TestS3PrefixesIsolateStores(t *testing.T) {
	base := fakeConfig(fakeS3InProcess(t))
	a, b := base, base
	a.Prefix, b.Prefix = "tenant-a", "/tenant-b/"
	sa, err := blob.NewS3(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := blob.NewS3(b)
	if err != nil {
		t.Fatal(err)
	}
	root := base
	sroot, err := blob.NewS3(root)
	if err != nil {
		t.Fatal(err)
	}
	blobtest.Put(t, sa, "doc.txt", "from a", "")
	blobtest.Put(t, sb, "doc.txt", "from b", "")
	if got, _ := blobtest.Get(t, sa, "doc.txt"); got != "from a" {
		t.Errorf("store a reads %q", got)
	}
	list, err := sroot.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(list); strings.Join(got, ",") != "tenant-a/doc.txt,tenant-b/doc.txt" {
		t.Errorf("bucket holds %v", got)
	}
	if list, _ := sa.List(t.Context(), ""); len(list) != 1 || list[0].Key != "doc.txt" {
		t.Errorf("store a lists %v", keysOf(list))
	}
}

func TestS3MissingBucketIsNotCreatedByDefault(t *testing.T) {
	cfg := fakeConfig(fakeS3InProcess(t))
	cfg.CreateBucket = false
	cfg.Bucket = "does-not-exist"
	s, err := blob.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "k", strings.NewReader("x"), 1, ""); err == nil {
		t.Error("Put into a missing bucket succeeded")
	}
	// GET carries S3's error code (NoSuchBucket), so a missing bucket is not
	// mistaken for a missing object. (HEAD has no body: Stat cannot tell.)
	if _, _, err := s.Get(t.Context(), "k"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get in a missing bucket: err = %v, want an error that is not ErrNotFound", err)
	}
	if _, err := s.List(t.Context(), ""); err == nil {
		t.Error("List of a missing bucket succeeded")
	}
}

func TestS3ETags(t *testing.T) {
	cfg := fakeConfig(fakeS3InProcess(t))
	cfg.PartSize = 5 << 20
	s, err := blob.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if info := blobtest.Put(t, s, "small", "hello", ""); info.ETag != md5hex("hello") {
		t.Errorf("single-part ETag = %q, want hex MD5", info.ETag)
	}
	big := strings.Repeat("0123456789abcdef", (12<<20)/16) // 12 MiB: three 5 MiB parts
	info, err := s.Put(t.Context(), "big", strings.NewReader(big), int64(len(big)), "")
	if err != nil {
		t.Fatal(err)
	}
	// The upload really was multipart. (gofakes3 then reports the whole
	// object's MD5 on HEAD where S3 keeps "<md5>-3", so only the content is
	// compared.)
	if !strings.HasSuffix(info.ETag, "-3") {
		t.Errorf("multipart ETag = %q, want the <md5>-3 form", info.ETag)
	}
	if got, _ := blobtest.Get(t, s, "big"); got != big {
		t.Errorf("multipart object read back %d bytes, want %d", len(got), len(big))
	}
}

// TestS3PlainHTTP covers minio-go's aws-chunked signed uploads (the path
// used with MinIO over http) for single PUTs, including the empty object.
func TestS3PlainHTTP(t *testing.T) {
	s, err := blob.NewS3(fakeConfig(fakeS3PlainHTTP(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 64 << 10, 3<<20 + 7} {
		key := fmt.Sprintf("http/%d", n)
		content := strings.Repeat("z", n)
		info := blobtest.Put(t, s, key, content, "text/plain")
		if info.Size != int64(n) || info.ETag != md5hex(content) {
			t.Errorf("Put %d bytes: %+v", n, info)
		}
		if got, gi := blobtest.Get(t, s, key); got != content || gi.ContentType != "text/plain" {
			t.Errorf("Get %d bytes: %d bytes, %+v", n, len(got), gi)
		}
	}
}

func TestNewS3RejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]blob.S3Config{
		"no bucket":         {Endpoint: "localhost:9000"},
		"scheme":            {Endpoint: "http://localhost:9000", Bucket: "b"},
		"path in endpoint":  {Endpoint: "localhost:9000/x", Bucket: "b"},
		"bad prefix":        {Bucket: "b", Prefix: "a/../b"},
		"tiny part size":    {Bucket: "b", PartSize: 1 << 20},
		"half credentials":  {Bucket: "b", AccessKey: "k"},
		"half credentials2": {Bucket: "b", SecretKey: "s"},
	} {
		if _, err := blob.NewS3(cfg); err == nil {
			t.Errorf("%s: NewS3 succeeded", name)
		}
	}
}
