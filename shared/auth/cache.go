package auth

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The principal cache: Authenticate answers a JWT or API key it resolved
// less than Config.CacheTTL ago from memory, without a database round trip
// (the cost of an authenticated request was a pool connection and a query
// before the handler's own). Anything that changes who a principal is or
// whether it may call — a role, department or deletion of the user, an API
// key's update or revocation — calls InvalidateUser/InvalidateAPIKey, which
// evicts here and publishes through Config.Invalidations (a Redis channel
// that every process subscribes to, see Evict). Staleness bound: a change is
// seen by every process within the pub/sub delivery (milliseconds); if a
// message is lost (Redis down), within CacheTTL (default 0: no cache; the
// deployments set YUXI_AUTH_CACHE_TTL, 5s by default).

// Invalidations publishes cache evictions to every process.
type Invalidations interface {
	Publish(ctx context.Context, message string) error
}

type cachedPrincipal struct {
	p       Principal
	version int        // a JWT subject's token version when cached
	until   time.Time  // the entry's end (CacheTTL)
	expires *time.Time // an API key's own expiry
	used    *time.Time // an API key's last_used_at as last written
}

type principalCache struct {
	mu    sync.Mutex
	users map[int64]cachedPrincipal  // JWT subjects
	keys  map[string]cachedPrincipal // API key hashes
}

func (c *principalCache) getUser(id int64, version int, now time.Time) (Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.users[id]
	if !ok || !now.Before(e.until) || e.version != version {
		return Principal{}, false
	}
	return e.p, true
}

func (c *principalCache) putUser(id int64, version int, p Principal, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users == nil {
		c.users = map[int64]cachedPrincipal{}
	}
	if len(c.users) > 100_000 {
		clear(c.users) // bounded memory; refilled on demand
	}
	c.users[id] = cachedPrincipal{p: p, version: version, until: until}
}

func (c *principalCache) getKey(hash string, now time.Time) (cachedPrincipal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.keys[hash]
	if !ok || !now.Before(e.until) || (e.expires != nil && !now.Before(*e.expires)) {
		return cachedPrincipal{}, false
	}
	return e, true
}

func (c *principalCache) putKey(hash string, e cachedPrincipal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[string]cachedPrincipal{}
	}
	if len(c.keys) > 100_000 {
		clear(c.keys)
	}
	c.keys[hash] = e
}

// evict drops what message names: "user:<id>" (the user's JWT entry and
// every API key of the user) or "key:<id>" (one API key).
func (c *principalCache) evict(message string) {
	kind, idText, ok := strings.Cut(message, ":")
	id, err := strconv.ParseInt(idText, 10, 64)
	if !ok || err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch kind {
	case "user":
		delete(c.users, id)
		for h, e := range c.keys {
			if e.p.UserID == id {
				delete(c.keys, h)
			}
		}
	case "key":
		for h, e := range c.keys {
			if e.p.APIKeyID != nil && *e.p.APIKeyID == id {
				delete(c.keys, h)
			}
		}
	}
}

// Evict applies an invalidation message received from another process (the
// subscriber of Config.Invalidations' channel calls it).
func (s *Service) Evict(message string) { s.cache.evict(message) }

// InvalidateUser drops user id's cached principals in every process: call it
// after changing the user's role, department or deleting them.
func (s *Service) InvalidateUser(ctx context.Context, id int64) {
	s.invalidate(ctx, "user:"+strconv.FormatInt(id, 10))
}

// InvalidateAPIKey drops API key id's cached principal in every process.
func (s *Service) InvalidateAPIKey(ctx context.Context, id int64) {
	s.invalidate(ctx, "key:"+strconv.FormatInt(id, 10))
}

func (s *Service) invalidate(ctx context.Context, message string) {
	s.cache.evict(message)
	if s.cfg.Invalidations != nil {
		// A lost message is bounded by CacheTTL; the change itself is committed.
		_ = s.cfg.Invalidations.Publish(context.WithoutCancel(ctx), message)
	}
}
