package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// BearerLaunch is how a managed agent of a user-auth mesh connects (a remote manager's): not a
// creds file, but the space's shared sentinel creds and bearers it exchanges its actor token for
// at the exchange, each living at most five minutes, renewed at every reconnect. Role and the
// channels are what its ledger row grants.
type BearerLaunch struct {
	Exchange       string
	ActorToken     string
	SentinelCreds  []byte
	Role           string
	AllowSubscribe []string
	AllowPublish   []string
}

// BearerMaterial is the launch material's part for a managed agent (BearerLaunch): the secrets
// are in files beside it.
type BearerMaterial struct {
	Exchange string `json:"exchange"`
	// LifecycleUID is the agent's lifecycle, the one its ledger row names.
	LifecycleUID string `json:"lifecycleUid"`
	// Token and Sentinel are the paths of the actor token and the sentinel creds.
	Token          string   `json:"token"`
	Sentinel       string   `json:"sentinel"`
	Role           string   `json:"role,omitempty"`
	AllowSubscribe []string `json:"allowSubscribe,omitempty"`
	AllowPublish   []string `json:"allowPublish,omitempty"`
}

// writeBearer writes a managed agent's secrets into dir and returns its material.
func writeBearer(dir string, uid wire.LifecycleUID, b *BearerLaunch) (*BearerMaterial, error) {
	m := &BearerMaterial{Exchange: b.Exchange, LifecycleUID: string(uid), Token: filepath.Join(dir, "actor.token"),
		Sentinel: filepath.Join(dir, "sentinel.creds"), Role: b.Role, AllowSubscribe: b.AllowSubscribe, AllowPublish: b.AllowPublish}
	if err := atomicfile.Write(m.Token, []byte(b.ActorToken), 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(m.Sentinel, b.SentinelCreds, 0o600); err != nil {
		return nil, err
	}
	return m, nil
}

// ConnectOptions returns the SDK options an agent connects with on its launch material m: its
// creds file, or, for a managed agent of a user-auth mesh, bearers fetched from its exchange
// with its actor token, afresh at every connect.
func (m *Material) ConnectOptions() ([]cotal.Option, error) {
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
	return append(opts, cotal.WithBearer(sentinel, g, func(ctx context.Context) (string, error) {
		tok, _, err := userauth.FetchAgentBearer(ctx, hc, b.Exchange, "", creds)
		return tok, err
	})), nil
}
