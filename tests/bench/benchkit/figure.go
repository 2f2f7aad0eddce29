package benchkit

import (
	"context"
	"slices"
)

// Figure is one figure of a bench program: the id -only selects it by, the
// name its failure is reported under, and Run, which measures it on the
// program's environment E and prints it into the report.
type Figure[E any] struct {
	ID, Name string
	Run      func(context.Context, E, *Report) error
}

// RunFigures runs, in order, the figures whose id is in selected; a figure
// that returns an error is recorded with Report.Fail and the next one runs.
func RunFigures[E any](ctx context.Context, figures []Figure[E], selected []string, e E, r *Report) {
	for _, f := range figures {
		if !slices.Contains(selected, f.ID) {
			continue
		}
		if err := f.Run(ctx, e, r); err != nil {
			r.Fail(f.Name, err)
		}
	}
}
