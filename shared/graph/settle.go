package graph

import (
	"context"
	"fmt"
)

// settler is an engine with maintenance to run once a build has written
// (the embedded engine: Postgres.Settle). Engines without it need none.
type settler interface {
	Settle(ctx context.Context) error
}

// Settle runs engine's after-build maintenance, if it has any: Builder.BuildFile
// calls it when a file's build changed the graph, and so does anything else
// that writes a graph in bulk and queries it next.
func Settle(ctx context.Context, engine Engine) error {
	s, ok := engine.(settler)
	if !ok {
		return nil
	}
	if err := s.Settle(ctx); err != nil {
		return fmt.Errorf("settle graph: %w", err)
	}
	return nil
}
