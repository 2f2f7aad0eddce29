package evaluation

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// gateTx applies the gate of the schedule that started r, if any.
func (s *Service) gateTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, r Run, metrics map[string]float64, overall *float64) error {
	return nil
}
