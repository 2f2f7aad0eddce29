package blob

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Credentials are the S3 keys OpenWith passes to the S3 engine. They are kept
// out of the URI so the URI can be logged and put in plain configuration.
type Credentials struct {
	AccessKey    string
	SecretKey    string
	SessionToken string
}

// OpenWith returns the Store a URI names. Accepted forms:
//
//	/var/lib/yuxi/blobs               a plain path (absolute or relative): Local
//	file:///var/lib/yuxi/blobs        the same as a file URI (host empty or "localhost")
//	s3://bucket                       S3 engine, keys at the bucket's root
//	s3://bucket/some/prefix?endpoint=minio:9000&region=us-east-1&ssl=false&path_style=true
//
// Query parameters of s3:// URIs (all optional; unknown ones are an error):
//
//	endpoint       host[:port]; default s3.amazonaws.com
//	               (GCS interoperability: storage.googleapis.com with region=auto)
//	region         bucket region; default: discovered by minio-go
//	ssl            true|false; default true
//	path_style     true|false; default false (minio-go chooses)
//	create_bucket  true|false; default false (tests and local development)
//	part_size      multipart part size in bytes; default 16 MiB
//
// The path after the bucket is S3Config.Prefix. Credentials never appear in
// the URI (user info is rejected); creds supplies them, empty for anonymous
// access. creds is ignored for the local engine.
func OpenWith(uri string, creds Credentials) (Store, error) {
	if uri == "" {
		return nil, errors.New("blob: empty store URI")
	}
	if !strings.Contains(uri, "://") {
		return NewLocal(uri)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("blob: store URI: %w", err)
	}
	if u.User != nil {
		return nil, errors.New("blob: store URI must not carry credentials; pass them separately")
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("blob: file URI with host %q: only local paths (file:///dir) are supported", u.Host)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, errors.New("blob: file URI takes no query or fragment")
		}
		if u.Path == "" {
			return nil, errors.New("blob: file URI has no path")
		}
		return NewLocal(u.Path)
	case "s3":
		cfg, err := parseS3URI(u)
		if err != nil {
			return nil, err
		}
		cfg.AccessKey, cfg.SecretKey, cfg.SessionToken = creds.AccessKey, creds.SecretKey, creds.SessionToken
		return NewS3(cfg)
	default:
		return nil, fmt.Errorf("blob: unsupported store URI scheme %q (want a path, file:// or s3://)", u.Scheme)
	}
}

// parseS3URI reads everything but the credentials from an s3:// URI.
func parseS3URI(u *url.URL) (S3Config, error) {
	cfg := S3Config{UseSSL: true}
	if u.Host == "" {
		return cfg, errors.New("blob: s3 URI has no bucket (want s3://bucket/prefix)")
	}
	if u.Port() != "" {
		return cfg, fmt.Errorf("blob: s3 URI host %q is the bucket; put the server in ?endpoint=host:port", u.Host)
	}
	if u.Fragment != "" {
		return cfg, errors.New("blob: s3 URI takes no fragment")
	}
	cfg.Bucket = u.Host
	cfg.Prefix = strings.Trim(u.Path, "/")
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return cfg, fmt.Errorf("blob: s3 URI query: %w", err)
	}
	for name, vals := range q {
		if len(vals) != 1 {
			return cfg, fmt.Errorf("blob: s3 URI: %s given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "endpoint":
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "ssl", "path_style", "create_bucket":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return cfg, fmt.Errorf("blob: s3 URI: %s=%q is not true or false", name, v)
			}
			switch name {
			case "ssl":
				cfg.UseSSL = b
			case "path_style":
				cfg.PathStyle = b
			default:
				cfg.CreateBucket = b
			}
		case "part_size":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return cfg, fmt.Errorf("blob: s3 URI: part_size=%q is not a byte count", v)
			}
			cfg.PartSize = n
		default:
			return cfg, fmt.Errorf("blob: s3 URI: unknown parameter %q", name)
		}
	}
	return cfg, nil
}
