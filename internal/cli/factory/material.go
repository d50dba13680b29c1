package factory

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// MaterialOptions returns the SDK options an agent connects with on its launch material m: its
// creds file, or, for a managed agent of a user-auth mesh, bearers fetched from its exchange
// with its actor token, afresh at every connect.
func MaterialOptions(m *manager.Material) ([]cotal.Option, error) {
	opts := []cotal.Option{cotal.WithSpace(m.Space)}
	if m.Bearer == nil {
		return append(opts, cotal.WithCreds(m.Creds)), nil
	}
	b := m.Bearer
	token, err := os.ReadFile(b.Token)
	if err != nil {
		return nil, fmt.Errorf("the agent's actor token: %w", err)
	}
	sentinel, err := os.ReadFile(b.Sentinel)
	if err != nil {
		return nil, fmt.Errorf("the space's sentinel creds: %w", err)
	}
	p, err := wire.ParsePrincipal(m.Principal)
	if err != nil {
		return nil, fmt.Errorf("launch material: %w", err)
	}
	g := cotal.Grant{Profile: "agent", Principal: p, Space: wire.Space(m.Space), Lifecycle: wire.LifecycleUID(b.LifecycleUID),
		Role: b.Role, AllowSubscribe: b.AllowSubscribe, AllowPublish: b.AllowPublish, Presence: true}
	creds := userauth.AgentCredentials{Owner: p.Owner(), Actor: p.Actor(), ActorToken: strings.TrimSpace(string(token))}
	hc := userauth.NewHTTPClient()
	exchanges := failover.New(failover.Split(b.Exchange)...)
	return append(opts, cotal.WithBearer(sentinel, g, func(ctx context.Context) (tok string, err error) {
		err = exchanges.Do(ctx, func(ctx context.Context, u string) (err error) {
			tok, _, err = userauth.FetchAgentBearer(ctx, hc, u, "", creds)
			return err
		})
		return tok, err
	})), nil
}
