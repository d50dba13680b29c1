package cotal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestWithBearerRefusesBadInput: a bearer option is refused, before any connection, for sentinel
// creds that do not parse, no bearer source, a grant without a principal, space or lifecycle, and
// beside a creds file.
func TestWithBearerRefusesBadInput(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	sentinel := m.Mint(t, ledger.Request{Profile: authority.ProfileProbe, Name: "sentinel"}).Creds
	agent := m.AgentCred(t, ledger.Request{Name: "alice"})
	p, _ := wire.NewPrincipal("u_aaaaaaaaaaaaaaaaaaaaaaaaaa", "dana")
	good := cotal.Grant{Principal: p, Space: m.Space, Lifecycle: wire.NewLifecycleUID()}
	token := func(context.Context) (string, error) { return "x", nil }
	noSpace, noLife := good, good
	noSpace.Space, noLife.Lifecycle = "", ""
	for name, opts := range map[string][]cotal.Option{
		"garbage sentinel creds": {cotal.WithBearer([]byte("nope"), good, token)},
		"no bearer source":       {cotal.WithBearer(sentinel, good, nil)},
		"no principal":           {cotal.WithBearer(sentinel, cotal.Grant{Space: m.Space, Lifecycle: good.Lifecycle}, token)},
		"no space":               {cotal.WithBearer(sentinel, noSpace, token)},
		"no lifecycle":           {cotal.WithBearer(sentinel, noLife, token)},
		"beside a creds file":    {cotal.WithCredsData(agent.Creds), cotal.WithBearer(sentinel, good, token)},
	} {
		if _, err := cotal.Connect(t.Context(), m.URL(), opts...); !errors.Is(err, cotal.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
}
