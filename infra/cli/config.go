package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Config is ~/.yuxi/config.toml: the remotes and which one is in use.
//
//	current = "local"
//
//	[remotes.local]
//	url = "http://localhost:5050"
//	api_key = "yxkey_…"
//
// The file holds API keys, so it is written 0600 (its directory 0700).
type Config struct {
	Current string
	Remotes map[string]*Remote
}

// Remote is one platform the CLI talks to.
type Remote struct {
	URL    string
	APIKey string
}

// loadConfig reads path; a missing file is an empty config. Only the
// subset of TOML the CLI writes is read: tables [remotes.<name>] and
// `key = "string"` pairs.
func loadConfig(path string) (*Config, error) {
	c := &Config{Remotes: map[string]*Remote{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	var cur *Remote
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			name, ok := strings.CutPrefix(strings.Trim(line, "[]"), "remotes.")
			if !ok {
				return nil, fmt.Errorf("%s:%d: unknown table %s", path, n, line)
			}
			if u, err := strconv.Unquote(name); err == nil {
				name = u
			}
			cur = &Remote{}
			c.Remotes[name] = cur
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: expected key = \"value\"", path, n)
		}
		k = strings.TrimSpace(k)
		val, err := strconv.Unquote(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s must be a quoted string", path, n, k)
		}
		switch {
		case cur == nil && k == "current":
			c.Current = val
		case cur != nil && k == "url":
			cur.URL = val
		case cur != nil && k == "api_key":
			cur.APIKey = val
		}
	}
	return c, sc.Err()
}

// save writes c to path atomically with mode 0600.
func (c *Config) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "current = %s\n", strconv.Quote(c.Current))
	names := make([]string, 0, len(c.Remotes))
	for n := range c.Remotes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := c.Remotes[n]
		fmt.Fprintf(&b, "\n[remotes.%s]\nurl = %s\n", strconv.Quote(n), strconv.Quote(r.URL))
		if r.APIKey != "" {
			fmt.Fprintf(&b, "api_key = %s\n", strconv.Quote(r.APIKey))
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.toml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
