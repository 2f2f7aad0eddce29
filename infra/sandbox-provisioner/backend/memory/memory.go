// Package memory is the provisioner's test backend: it records sandboxes
// and answers Exec from a script, isolating nothing. Provisioner tests use
// it where no real process matters (reaper, restart recovery, API rules).
//
// Imported by: provisioner tests and the provisioner's main (for
// PROVISIONER_BACKEND=memory). May import: infra/sandbox-provisioner/backend
// and the standard library.
package memory

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// Backend keeps sandboxes in a map.
type Backend struct {
	// Script answers Exec; nil echoes the command with exit code 0.
	Script func(s backend.Spec, r backend.ExecRequest) backend.ExecResult

	mu        sync.Mutex
	sandboxes map[string]backend.Spec
	ensures   int
	destroys  int
}

// New returns an empty backend.
func New() *Backend { return &Backend{sandboxes: map[string]backend.Spec{}} }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "memory" }

// Ensure implements backend.Backend.
func (b *Backend) Ensure(ctx context.Context, s backend.Spec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sandboxes[s.ID]; !ok {
		b.ensures++
	}
	b.sandboxes[s.ID] = s
	return nil
}

// Exec implements backend.Backend.
func (b *Backend) Exec(ctx context.Context, id string, r backend.ExecRequest) (backend.ExecResult, error) {
	b.mu.Lock()
	s, ok := b.sandboxes[id]
	script := b.Script
	b.mu.Unlock()
	if !ok {
		return backend.ExecResult{}, fmt.Errorf("memory %s: %w", id, backend.ErrNotFound)
	}
	if script != nil {
		return script(s, r), nil
	}
	return backend.ExecResult{Output: []byte(r.Command)}, nil
}

// Destroy implements backend.Backend.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sandboxes[id]; ok {
		b.destroys++
	}
	delete(b.sandboxes, id)
	return nil
}

// List implements backend.Backend.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.sandboxes))
	for id := range b.sandboxes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// Counts reports how many sandboxes were created and destroyed.
func (b *Backend) Counts() (created, destroyed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ensures, b.destroys
}
