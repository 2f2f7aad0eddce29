package blob

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenLocal(t *testing.T) {
	dir := t.TempDir()
	for _, uri := range []string{
		filepath.Join(dir, "plain"),
		"file://" + filepath.Join(dir, "uri"),
		"file://localhost" + filepath.Join(dir, "localhost"),
	} {
		s, err := OpenWith(uri, Credentials{})
		if err != nil {
			t.Errorf("OpenWith(%q): %v", uri, err)
			continue
		}
		l, ok := s.(*Local)
		if !ok {
			t.Errorf("OpenWith(%q) = %T, want *Local", uri, s)
			continue
		}
		if !strings.HasPrefix(l.Dir(), dir) {
			t.Errorf("OpenWith(%q) dir = %q", uri, l.Dir())
		}
	}
}

func TestParseS3URI(t *testing.T) {
	cases := []struct {
		uri  string
		want S3Config
	}{
		{"s3://bucket", S3Config{Bucket: "bucket", UseSSL: true}},
		{"s3://bucket/", S3Config{Bucket: "bucket", UseSSL: true}},
		{"s3://my.bucket/yuxi/files/?region=eu-west-1", S3Config{Bucket: "my.bucket", Prefix: "yuxi/files", Region: "eu-west-1", UseSSL: true}},
		{"s3://uploads/dev?endpoint=localhost:9000&region=us-east-1&ssl=false&path_style=true&create_bucket=true&part_size=8388608",
			S3Config{Bucket: "uploads", Prefix: "dev", Endpoint: "localhost:9000", Region: "us-east-1", PathStyle: true, CreateBucket: true, PartSize: 8 << 20}},
		{"s3://gcs-bucket?endpoint=storage.googleapis.com&region=auto", S3Config{Bucket: "gcs-bucket", Endpoint: "storage.googleapis.com", Region: "auto", UseSSL: true}},
		{"s3://b/with%20space", S3Config{Bucket: "b", Prefix: "with space", UseSSL: true}},
	}
	for _, c := range cases {
		u, err := url.Parse(c.uri)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseS3URI(u)
		if err != nil {
			t.Errorf("parseS3URI(%q): %v", c.uri, err)
			continue
		}
		if got != c.want {
			t.Errorf("parseS3URI(%q) = %+v\nwant %+v", c.uri, got, c.want)
		}
	}
}

func TestOpenWithPassesCredentialsAndBuildsS3(t *testing.T) {
	s, err := OpenWith("s3://bucket/p?endpoint=localhost:9000&ssl=false&path_style=true",
		Credentials{AccessKey: "ak", SecretKey: "sk", SessionToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	s3, ok := s.(*S3)
	if !ok {
		t.Fatalf("OpenWith = %T, want *S3", s)
	}
	if s3.bucket != "bucket" || s3.prefix != "p/" || s3.client.EndpointURL().Host != "localhost:9000" || s3.client.EndpointURL().Scheme != "http" {
		t.Errorf("S3 = bucket %q prefix %q endpoint %v", s3.bucket, s3.prefix, s3.client.EndpointURL())
	}
	v, err := s3.client.GetCreds()
	if err != nil || v.AccessKeyID != "ak" || v.SecretAccessKey != "sk" || v.SessionToken != "tok" {
		t.Errorf("credentials = %+v, %v", v, err)
	}
}

func TestOpenRejects(t *testing.T) {
	for _, uri := range []string{
		"",
		"s3://",
		"s3://key:secret@bucket/prefix",
		"s3://bucket:9000/prefix",
		"s3://bucket?endpoint=localhost:9000&sssl=false",
		"s3://bucket?ssl=maybe",
		"s3://bucket?part_size=big",
		"s3://bucket?part_size=1024",
		"s3://bucket?region=a&region=b",
		"s3://bucket/../escape",
		"s3://bucket#frag",
		"s3://bucket?endpoint=http://localhost:9000",
		"gs://bucket",
		"http://example.com/bucket",
		"file://remote-host/dir",
		"file:///tmp/x?opt=1",
	} {
		if s, err := OpenWith(uri, Credentials{}); err == nil {
			t.Errorf("OpenWith(%q) = %T, want an error", uri, s)
		}
	}
}
