package vector

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
)

// collection is one cached collection of one Postgres store.
type collection struct {
	name string

	// sem (one slot) is held while the copy is refreshed or a graph
	// installed: refreshes are serialised, and a search that finds the copy
	// behind waits for the refresh in flight instead of starting another.
	sem  chan struct{}
	snap atomic.Pointer[snapshot]
	st   *writeState // guarded by sem

	building   atomic.Bool  // a graph is being built
	lastChange atomic.Int64 // unix nanoseconds when a delta was last applied
	loads      atomic.Int64
	refreshes  atomic.Int64

	// Guarded by cache.mu.
	elem   *list.Element
	bytes  int64
	cached bool
}

func (c *collection) lock(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *collection) unlock() { <-c.sem }

// cache holds the collections of one store, least recently used first out
// once their total size exceeds max. A collection larger than max alone stays
// cached (it is the one being searched) but pushes every other one out.
type cache struct {
	mu     sync.Mutex
	max    int64
	total  int64
	byName map[string]*collection
	lru    *list.List // of *collection, most recently used at the front
}

func newCache(max int64) *cache {
	return &cache{max: max, byName: map[string]*collection{}, lru: list.New()}
}

// get returns the named collection, creating an empty (unloaded) one, and
// marks it most recently used.
func (c *cache) get(name string) *collection {
	c.mu.Lock()
	defer c.mu.Unlock()
	col, ok := c.byName[name]
	if !ok {
		col = &collection{name: name, sem: make(chan struct{}, 1), cached: true}
		col.elem = c.lru.PushFront(col)
		c.byName[name] = col
		return col
	}
	c.lru.MoveToFront(col.elem)
	return col
}

// peek returns the named collection without touching the LRU order.
func (c *cache) peek(name string) *collection {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byName[name]
}

// resize records col's new size and evicts the least recently used others
// while the total exceeds the cap.
func (c *cache) resize(col *collection, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !col.cached {
		return
	}
	c.total += bytes - col.bytes
	col.bytes = bytes
	for e := c.lru.Back(); e != nil && c.total > c.max; {
		victim := e.Value.(*collection)
		e = e.Prev()
		if victim != col {
			c.removeLocked(victim)
		}
	}
}

// remove forgets the named collection (dropped, or found missing).
func (c *cache) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if col, ok := c.byName[name]; ok {
		c.removeLocked(col)
	}
}

func (c *cache) removeLocked(col *collection) {
	c.lru.Remove(col.elem)
	delete(c.byName, col.name)
	c.total -= col.bytes
	col.cached = false
	col.bytes = 0
}

func (c *cache) totalBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
