package skill

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Remote configures remote skill sources: a repository archive fetched
// from an allow-listed host only, through the SSRF-guarded client.
type Remote struct {
	// AllowedHosts are exact host names (or host:port) sources may name;
	// default github.com and modelscope.cn (the original's default). An
	// empty list after defaults means "closed": set Closed.
	AllowedHosts []string
	Closed       bool
	// HTTPHosts may be fetched over plain http (a local test server); the
	// product takes https only.
	HTTPHosts []string
	// Client fetches archives (the SSRF-guarded client); nil: remote off.
	Client httpClient
	// GitHubArchive formats owner, repo into the archive URL of an
	// owner/repo shorthand (default https://codeload.github.com/%s/%s/zip/HEAD).
	GitHubArchive string
	// SearchURL is a skills.sh-like search API; empty: remote search
	// answers 501 remote_search_not_configured.
	SearchURL string
}

// RemoteFor builds the remote configuration from a host list (see
// YUXI_SKILL_SOURCE_HOSTS): "host", "host:port", "http://host:port"
// (plain http allowed from that origin), or "none".
func RemoteFor(hosts []string, client httpClient) Remote {
	r := Remote{Client: client}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "none":
			r.Closed = true
		case strings.HasPrefix(h, "http://"):
			h = strings.TrimSuffix(strings.TrimPrefix(h, "http://"), "/")
			r.HTTPHosts = append(r.HTTPHosts, h)
			r.AllowedHosts = append(r.AllowedHosts, h)
		case strings.HasPrefix(h, "https://"):
			r.AllowedHosts = append(r.AllowedHosts, strings.TrimSuffix(strings.TrimPrefix(h, "https://"), "/"))
		case h != "":
			r.AllowedHosts = append(r.AllowedHosts, h)
		}
	}
	return r
}

func (r Remote) withDefaults() Remote {
	if len(r.AllowedHosts) == 0 && !r.Closed {
		r.AllowedHosts = []string{"github.com", "codeload.github.com", "modelscope.cn"}
	}
	if r.GitHubArchive == "" {
		r.GitHubArchive = "https://codeload.github.com/%s/%s/zip/HEAD"
	}
	return r
}

var ownerRepo = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)

// archiveURL resolves a source (owner/repo or a URL) and checks it
// against the allow-list.
func (s *Service) archiveURL(source string) (string, error) {
	rc := s.cfg.Remote
	if rc.Client == nil || rc.Closed {
		return "", failure.New(failure.KindUnavailable, "remote_skills_disabled", "remote skill sources are disabled")
	}
	source = strings.TrimSpace(source)
	raw := source
	if ownerRepo.MatchString(source) {
		parts := strings.SplitN(source, "/", 2)
		raw = fmt.Sprintf(rc.GitHubArchive, parts[0], strings.TrimSuffix(parts[1], ".git"))
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", failure.Unprocessable("invalid_remote_source", "source must be owner/repo or an https URL")
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && slices.Contains(rc.HTTPHosts, strings.ToLower(u.Host))) {
		return "", failure.Unprocessable("invalid_remote_source", "source must use https")
	}
	if u.User != nil {
		return "", failure.Unprocessable("invalid_remote_source", "source must not carry credentials")
	}
	if !slices.Contains(rc.AllowedHosts, strings.ToLower(u.Host)) && !slices.Contains(rc.AllowedHosts, strings.ToLower(u.Hostname())) {
		return "", failure.Forbidden("remote_source_forbidden", "host %q is not an allowed skill source (allowed: %s)", u.Host, strings.Join(rc.AllowedHosts, ", "))
	}
	// A GitHub repository page is fetched as its archive.
	if u.Host == "github.com" {
		if p := strings.Trim(u.Path, "/"); ownerRepo.MatchString(p) {
			parts := strings.SplitN(p, "/", 2)
			return fmt.Sprintf(rc.GitHubArchive, parts[0], strings.TrimSuffix(parts[1], ".git")), nil
		}
	}
	return u.String(), nil
}

// fetchRemote downloads and unpacks a source's archive (bounded by the
// archive limits) into its skills, by slug.
func (s *Service) fetchRemote(ctx context.Context, source string) (map[string][]File, error) {
	u, err := s.archiveURL(source)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, failure.Unprocessable("invalid_remote_source", "%v", err)
	}
	resp, err := s.cfg.Remote.Client.Do(req)
	if err != nil {
		if fe, ok := failure.As(err); ok {
			return nil, fe
		}
		return nil, failure.New(failure.KindUnprocessable, "remote_source_unreachable", "fetch %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, failure.Unprocessable("remote_source_unreachable", "fetch %s: HTTP %d", u, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.Limits.MaxArchive+1))
	if err != nil {
		return nil, failure.Unprocessable("remote_source_unreachable", "fetch %s: %v", u, err)
	}
	files, err := Unzip(data, s.cfg.Limits)
	if err != nil {
		return nil, err
	}
	out := map[string][]File{}
	for _, fs := range skillDirs(files) {
		md, _ := skillMD(fs)
		m, err := ParseSkillMD(md)
		if err != nil {
			continue // not a valid skill: not listed
		}
		if _, dup := out[m.Slug]; !dup {
			out[m.Slug] = fs
		}
	}
	return out, nil
}

// RemoteSkill is one skill a remote source offers.
type RemoteSkill struct {
	Slug        string `json:"slug"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// RemoteList is POST /api/skills/remote/list.
func (s *Service) RemoteList(ctx context.Context, source string) ([]RemoteSkill, error) {
	found, err := s.fetchRemote(ctx, source)
	if err != nil {
		return nil, err
	}
	out := []RemoteSkill{}
	for _, fs := range found {
		md, _ := skillMD(fs)
		m, _ := ParseSkillMD(md)
		out = append(out, RemoteSkill{Slug: m.Slug, Name: m.Name, Description: m.Description})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out, nil
}

// RemotePrepare is POST /api/skills/remote/prepare: the named skills of a
// source become an install draft (a missing one is a failed item).
func (s *Service) RemotePrepare(ctx context.Context, sub access.Subject, source string, names []string) (Draft, error) {
	names = normalize(names)
	if len(names) == 0 || len(names) > 50 {
		return Draft{}, failure.Unprocessable("invalid_skills", "skills must name 1 to 50 skills of the source")
	}
	found, err := s.fetchRemote(ctx, source)
	if err != nil {
		return Draft{}, err
	}
	d := s.newDraft(sub, SourceRemote, source)
	for _, n := range names {
		fs, ok := found[n]
		if !ok {
			d.Items = append(d.Items, DraftItem{Slug: n, OriginalName: n, Warnings: []string{}, Error: "not found in the source"})
			continue
		}
		item, err := s.stage(ctx, d.DraftID, fs)
		if err != nil {
			d.Items = append(d.Items, DraftItem{Slug: n, OriginalName: n, Warnings: []string{}, Error: errText(err)})
			continue
		}
		d.Items = append(d.Items, item)
	}
	return d, s.saveDraft(ctx, d)
}

// RemoteSearch is POST /api/skills/remote/search. No search service is
// configured in this build: it says so.
func (s *Service) RemoteSearch(ctx context.Context, query string) ([]RemoteSkill, error) {
	return nil, failure.New(failure.KindUnprocessable, "remote_search_not_configured", "remote skill search is not configured")
}
