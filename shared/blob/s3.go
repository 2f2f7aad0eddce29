package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config configures the S3 engine. Main builds it (or Open parses a URI)
// and supplies the credentials; this package reads no environment.
type S3Config struct {
	// Endpoint is host[:port] without a scheme, e.g. "s3.amazonaws.com",
	// "minio:9000", "storage.googleapis.com". Default "s3.amazonaws.com".
	Endpoint string
	// Region of the bucket; empty lets minio-go discover it (one extra
	// request per bucket). GCS interoperability accepts "auto".
	Region string
	// AccessKey, SecretKey and SessionToken are static credentials (on AWS
	// Lambda: the execution role's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
	// AWS_SESSION_TOKEN, read by main). All empty means anonymous requests.
	AccessKey    string
	SecretKey    string
	SessionToken string
	// Bucket holds the objects. Required.
	Bucket string
	// UseSSL selects https.
	UseSSL bool
	// Prefix, when set, is prepended (with a "/") to every key, so several
	// stores can share a bucket. It must itself be a valid key.
	Prefix string
	// PathStyle forces path-style requests (http://host/bucket/key), which
	// MinIO and most S3-compatible servers need. When false minio-go chooses:
	// virtual-host style for AWS and GCS, path style for other endpoints.
	PathStyle bool
	// CreateBucket creates the bucket on first use when it does not exist.
	// For tests and local development; production buckets are provisioned by
	// terraform.
	CreateBucket bool
	// PartSize is the multipart part size and the most one Put buffers in
	// memory. Objects larger than it (or of unknown size) are uploaded in
	// parts. Default DefaultPartSize; S3 accepts 5 MiB to 5 GiB and at most
	// 10,000 parts, so an object of unknown size may reach PartSize × 10,000.
	PartSize uint64
	// Transport overrides the HTTP transport (optional).
	Transport http.RoundTripper
}

// DefaultPartSize is the multipart part size when S3Config.PartSize is zero.
const DefaultPartSize = 16 << 20

// minPartSize is S3's smallest part (except the last).
const minPartSize = 5 << 20

// S3 is the S3-protocol engine. Objects are stored under S3Config.Prefix
// with their content type as Content-Type. Get is one GET whose headers and
// body come from the same response. Stat is a HEAD, which has no error body:
// a missing bucket is reported as ErrNotFound there (Get, Put and List report
// NoSuchBucket).
type S3 struct {
	client   *minio.Client
	bucket   string
	prefix   string // "" or "<prefix>/"
	partSize uint64
	region   string

	createBucket bool
	mu           sync.Mutex // guards bucketReady
	bucketReady  bool
}

// NewS3 returns a store over cfg. It makes no request; with CreateBucket the
// bucket is checked and created by the first operation.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("blob: s3: bucket is required")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "s3.amazonaws.com"
	}
	if strings.Contains(cfg.Endpoint, "://") || strings.Contains(cfg.Endpoint, "/") {
		return nil, fmt.Errorf("blob: s3: endpoint %q must be host[:port] without scheme or path (use UseSSL for https)", cfg.Endpoint)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("blob: s3: prefix: %w", err)
		}
		prefix += "/"
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if partSize < minPartSize {
		return nil, fmt.Errorf("blob: s3: part size %d is below S3's minimum of %d", partSize, minPartSize)
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("blob: s3: give both access key and secret key, or neither (anonymous)")
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		// Empty keys sign nothing: anonymous requests.
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       cfg.UseSSL,
		Region:       cfg.Region,
		BucketLookup: lookup,
		Transport:    cfg.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("blob: s3: %w", err)
	}
	return &S3{
		client:       client,
		bucket:       cfg.Bucket,
		prefix:       prefix,
		partSize:     partSize,
		region:       cfg.Region,
		createBucket: cfg.CreateBucket,
	}, nil
}

// ensureBucket creates the bucket once when CreateBucket is set. A failure is
// returned and retried by the next operation.
func (s *S3) ensureBucket(ctx context.Context) error {
	if !s.createBucket {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bucketReady {
		return nil
	}
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("blob: s3: bucket %s: %w", s.bucket, err)
	}
	if !ok {
		err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: s.region})
		if err != nil {
			code := s3Code(err)
			if code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
				return fmt.Errorf("blob: s3: create bucket %s: %w", s.bucket, err)
			}
		}
	}
	s.bucketReady = true
	return nil
}

func (s *S3) object(key string) string { return s.prefix + key }

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	ct, err := contentTypeOrDefault(contentType)
	if err != nil {
		return Info{}, err
	}
	if err := checkSize(size); err != nil {
		return Info{}, err
	}
	if err := s.ensureBucket(ctx); err != nil {
		return Info{}, err
	}
	// Memory stays bounded by one part: minio-go buffers parts of plain
	// readers one at a time, but uploads io.ReaderAt sources with several
	// parallel part buffers, so only a small seekable body (sent in one PUT,
	// which minio-go can retry by seeking) is passed through as is.
	//
	// No partial object, ever: an object of known size up to PartSize is one
	// PUT with that Content-Length, which S3 stores only when the whole body
	// arrived; a larger or unsized one is a multipart upload, invisible until
	// CompleteMultipartUpload, and minio-go aborts a failed upload (with a
	// context of its own, so even after a cancellation) — the parts of an
	// upload whose process died are left to the bucket's
	// AbortIncompleteMultipartUpload lifecycle rule, never visible as an object.
	//
	// Every body reads through ctx: once ctx is done the next Read fails, so
	// the transport cannot send the rest of the body in the moment before it
	// notices the cancellation itself. Without that, a Put cancelled part way
	// could still deliver its whole body under load and store the object
	// while reporting the cancellation (the TestS3Contract/CancelledPut flake).
	// A cancellation after the last byte was sent remains a true race, as
	// for any remote write: the object may or may not have been stored.
	var body io.Reader
	ra, isReaderAt := r.(io.ReaderAt)
	sk, isSeeker := r.(io.Seeker)
	switch {
	case size >= 0 && uint64(size) <= s.partSize && isReaderAt && isSeeker:
		// minio-go sends exactly size bytes from the current offset.
		body = &ctxReadSeekerAt{ctx: ctx, r: r, ra: ra, sk: sk}
	case size >= 0:
		body = withContext(ctx, io.LimitReader(r, size))
	default:
		body = withContext(ctx, r)
	}
	up, err := s.client.PutObject(ctx, s.bucket, s.object(key), body, size, minio.PutObjectOptions{
		ContentType: ct,
		PartSize:    s.partSize,
		// Over plain HTTP minio-go signs payloads in aws-chunked streams, and
		// sends an empty one with Transfer-Encoding: chunked, which servers
		// that insist on Content-Length refuse. An empty body has nothing to
		// sign, so it goes as UNSIGNED-PAYLOAD with Content-Length: 0.
		DisableContentSha256: size == 0,
	})
	if err != nil {
		return Info{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if size >= 0 && up.Size != size {
		// minio-go checks this for multipart uploads; a single PUT that sent
		// fewer bytes than announced fails in net/http before reaching here.
		return Info{}, fmt.Errorf("blob: put %s: stored %d of %d bytes: %w", key, up.Size, size, io.ErrUnexpectedEOF)
	}
	return Info{Key: key, Size: up.Size, ContentType: ct, ETag: trimETag(up.ETag), ModTime: up.LastModified}, nil
}

// ctxReadSeekerAt is a seekable body whose reads fail once ctx is done.
type ctxReadSeekerAt struct {
	ctx context.Context
	r   io.Reader
	ra  io.ReaderAt
	sk  io.Seeker
}

func (c *ctxReadSeekerAt) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (c *ctxReadSeekerAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.ra.ReadAt(p, off)
}

func (c *ctxReadSeekerAt) Seek(offset int64, whence int) (int64, error) {
	return c.sk.Seek(offset, whence)
}

// Get implements Store. The reader streams the response body and fails once
// ctx is done.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, err
	}
	if err := s.ensureBucket(ctx); err != nil {
		return nil, Info{}, err
	}
	// One GET whose headers and body come from the same response, so the Info
	// always describes the bytes returned. (minio.Object's Stat sends a HEAD
	// and relies on If-Match for its later GET, which not every server honours.)
	body, st, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, s.object(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, s.mapErr("get", key, err)
	}
	return body, s.info(key, st), nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	if err := s.ensureBucket(ctx); err != nil {
		return Info{}, err
	}
	st, err := s.client.StatObject(ctx, s.bucket, s.object(key), minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.mapErr("stat", key, err)
	}
	return s.info(key, st), nil
}

// Delete implements Store. S3 answers a delete of a missing key with success.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.ensureBucket(ctx); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s.object(key), minio.RemoveObjectOptions{}); err != nil {
		if s3Code(err) == minio.NoSuchKey {
			return nil
		}
		return fmt.Errorf("blob: delete %s: %w", key, err)
	}
	return nil
}

// List implements Store. Objects under the prefix whose names are not valid
// keys (e.g. "folder/" placeholders made by consoles) are left out, since no
// other method could address them.
func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := s.ensureBucket(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx) // stops minio-go's lister on early return
	defer cancel()
	var out []Info
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{
		Prefix:    s.prefix + prefix,
		Recursive: true,
	}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("blob: list %q: %w", prefix, obj.Err)
		}
		key, ok := strings.CutPrefix(obj.Key, s.prefix)
		if !ok || ValidateKey(key) != nil {
			continue
		}
		out = append(out, Info{Key: key, Size: obj.Size, ETag: trimETag(obj.ETag), ModTime: obj.LastModified})
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *S3) info(key string, st minio.ObjectInfo) Info {
	ct := st.ContentType
	if ct == "" {
		ct = DefaultContentType
	}
	return Info{Key: key, Size: st.Size, ContentType: ct, ETag: trimETag(st.ETag), ModTime: st.LastModified}
}

func (s *S3) mapErr(op, key string, err error) error {
	if s3Code(err) == minio.NoSuchKey {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fmt.Errorf("blob: %s %s: %w", op, key, err)
}

func s3Code(err error) string {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp.Code
	}
	return ""
}

func trimETag(etag string) string { return strings.Trim(etag, `"`) }
