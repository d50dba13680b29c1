package factory

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// MeshActor is the actor a person acts as on a user-auth mesh (--mesh) unless told otherwise:
// their CLI's, the row `cotal actor grant` writes for them.
const MeshActor = "cli"

// CheckMeshURL refuses a --mesh value that names no URL, or a URL that is neither https nor http
// on loopback, as a usage error naming the flag. It may name several exchanges, comma-separated:
// the nodes of a cluster.
func CheckMeshURL(meshURL string) error {
	urls := failover.Split(meshURL)
	if len(urls) == 0 {
		return &exit.UsageError{Err: fmt.Errorf("--mesh %q names no URL", meshURL)}
	}
	for _, u := range urls {
		if err := oidc.CheckURL(u); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--mesh %s: %w", u, err)}
		}
	}
	return nil
}

// CheckMesh is CheckMeshURL for a command that otherwise acts on the running mesh of --dir: --mesh
// names another mesh, so --dir and --space with it are a usage error rather than ignored.
func (f *Factory) CheckMesh(meshURL string) error {
	if f.Target.Dir != "" || f.Target.Space != "" {
		return &exit.UsageError{Err: fmt.Errorf("--mesh %s names the mesh and its space: drop --dir and --space", meshURL)}
	}
	return CheckMeshURL(meshURL)
}

// MeshControl is Control for the person logged in to the user-auth mesh at meshURL (`cotal
// login --mesh`): a manager-caller view of one manager instance (instance, or the only live one
// they may address when it is empty), calling as their actor MeshActor. It reads no registry, so
// its Records is nil and every call goes to that one instance. A refusal at the exchange is an
// authentication error.
func (f *Factory) MeshControl(ctx context.Context, meshURL string, instance wire.LifecycleUID) (*Control, error) {
	path, err := oidc.DefaultSessionsPath()
	if err != nil {
		return nil, err
	}
	mc, err := authservice.DialManager(ctx, userauth.NewHTTPClient(), path, meshURL, MeshActor, instance)
	if errors.Is(err, userauth.ErrDenied) {
		return nil, &exit.AuthError{Err: fmt.Errorf("%w (is a manager you may address running? `cotal actor list` on the mesh's host shows your scopes)", err)}
	} else if err != nil {
		return nil, err
	}
	m := manager.NewClient(mc.Conn, mc.Space, mc.Me, MeshActor)
	m.Pinned = mc.Instance
	return &Control{Conn: mc.Conn, Space: mc.Space, Me: mc.Me, Manager: m}, nil
}

// MeshSessionHolder is where the person logged in to the user-auth mesh at meshURL takes their
// half of a session their remote manager redeemed for them (as MeshActor) and ends it, and the
// broker the half connects to.
func (f *Factory) MeshSessionHolder(ctx context.Context, meshURL string) (*remotemgr.HolderClient, string, error) {
	path, err := oidc.DefaultSessionsPath()
	if err != nil {
		return nil, "", err
	}
	return authservice.SessionHolder(ctx, userauth.NewHTTPClient(), path, meshURL, MeshActor)
}
