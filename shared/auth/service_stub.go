package auth

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Service is a placeholder until the auth package lands.
type Service struct{}

// Authenticate is a placeholder until the auth package lands.
func (s *Service) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	return Principal{}, failure.Unauthorized("not_authenticated", "not implemented")
}
