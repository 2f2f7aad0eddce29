// Package identity builds the identity side of the API on a bootstrap.Core:
// the auth service (chat.Auth), users' own settings and images (avatars,
// profile and chat-message images), the content guard (keywords, and LLM
// moderation through the process's models), and OIDC
// single sign-on from the original's OIDC_* variables. It opens no
// connection of its own; the OIDC provider is reached on first login.
//
// Imported by: the intake main, infra/local.
// May import: shared/bootstrap, shared/bootstrap/chat, shared/auth, shared/blob,
// shared/contentguard, shared/oidc, shared/sysconfig, shared/usersettings,
// shared/chatimage, shared/task, shared/dashboard.
package identity

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/chatimage"
	"github.com/yuxi-serverless/yuxi/shared/contentguard"
	"github.com/yuxi-serverless/yuxi/shared/dashboard"
	"github.com/yuxi-serverless/yuxi/shared/oidc"
	"github.com/yuxi-serverless/yuxi/shared/sysconfig"
	"github.com/yuxi-serverless/yuxi/shared/task"
	"github.com/yuxi-serverless/yuxi/shared/usersettings"
)

// Kit is what the identity routes need.
type Kit struct {
	Auth     *auth.Service
	Settings *usersettings.Store
	OIDC     *oidc.Service
	// SysConfig is the system settings (/api/system/config).
	SysConfig *sysconfig.Store
	// Guard is the content guard over SysConfig's keyword list.
	Guard *contentguard.Guard
	// ChatImages are images uploaded for chat messages (/api/chat/image/upload).
	ChatImages *chatimage.Store
	// Ready are the dependencies /api/system/ready checks: Postgres and Redis.
	Ready map[string]func(context.Context) error
	// Tasks is the task centre (/api/tasks).
	Tasks *task.Store
	// Dashboard is the superadmin dashboard (/api/dashboard).
	Dashboard *dashboard.Store
}

// Open builds the kit; objects stores uploaded images (nil: uploads answer 503).
func Open(ctx context.Context, core *bootstrap.Core, objects blob.Store) (Kit, error) {
	a, err := chat.Auth(ctx, core)
	if err != nil {
		return Kit{}, err
	}
	cfg, err := oidc.LoadConfig(core.Config.Environ)
	if err != nil {
		return Kit{}, err
	}
	sys := sysconfig.New(core.Pool, core.Redis, core.Config.RedisPrefix)
	return Kit{Auth: a, Settings: usersettings.New(core.Pool, objects),
		OIDC:       oidc.New(cfg, core.Pool, a, oidc.Options{Log: core.Log}),
		SysConfig:  sys,
		Guard:      contentguard.New(sys).WithModeration(contentguard.LLMModerator{Models: core.Providers}),
		ChatImages: chatimage.New(core.Pool, objects),
		Tasks:      task.New(core.Pool),
		Dashboard:  dashboard.New(core.Pool),
		Ready: map[string]func(context.Context) error{
			"postgres": core.Pool.Ping,
			"redis":    func(ctx context.Context) error { return core.Redis.Ping(ctx).Err() },
		}}, nil
}
