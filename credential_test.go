package cotal_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

func TestReadGrantFromCreds(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	cred := m.AgentCred(t, ledger.Request{Name: "alice", AllowPublish: []string{"general"}, Subscribe: []string{"team.>"}, Role: "reviewer"})
	g, err := cotal.ParseCreds(cred.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if g.Principal != cred.Principal || g.Space != "main" || g.Lifecycle != cred.LifecycleUID || g.Role != "reviewer" ||
		g.Profile != "agent" || g.UserKey != cred.PublicKey || !g.Expires.IsZero() {
		t.Errorf("grant %+v", g)
	}
	if !g.CanPost("general") || g.CanPost("team.x") || !g.CanRead("team.backend") || g.CanRead("general") {
		t.Errorf("ACLs read as publish %q subscribe %q", g.AllowPublish, g.AllowSubscribe)
	}
}

// TestReadEndpointFactsFromCreds: an agent's capabilities come back from their tags, and a
// control instrument's caller lifecycle from its reply rail.
func TestReadEndpointFactsFromCreds(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	cred := m.AgentCred(t, ledger.Request{Name: "carol", Capabilities: []string{"spawn"}})
	g, err := cotal.ParseCreds(cred.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Capabilities, []string{"spawn"}) || g.Lifecycle != cred.LifecycleUID {
		t.Errorf("capabilities %q, lifecycle %s", g.Capabilities, g.Lifecycle)
	}
	plain, err := cotal.ParseCreds(m.AgentCred(t, ledger.Request{Name: "alice"}).Creds)
	if err != nil || len(plain.Capabilities) != 0 {
		t.Errorf("an agent without capabilities reads %q, %v", plain.Capabilities, err)
	}
	ctl := m.Mint(t, ledger.Request{Profile: "control-caller-admin", Name: "operator"})
	cg, err := cotal.ParseCreds(ctl.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ParseLifecycleUID(string(cg.Lifecycle)); err != nil || cg.Profile != "control-caller-admin" || cg.Space != "main" {
		t.Errorf("control grant %+v: %v", cg, err)
	}
}

func TestExpiredCredsAreRefused(t *testing.T) {
	acct, _ := nkeys.CreateAccount()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Tags = jwt.TagList{"principal:local.old"}
	uc.Permissions.Pub.Allow.Add("cotal.main.inst.*.*.local.old")
	uc.Expires = time.Now().Add(-time.Hour).Unix()
	tok, err := uc.Encode(acct)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cotal.Connect(t.Context(), "nats://127.0.0.1:1", cotal.WithCredsData(creds))
	if !errors.Is(err, cotal.ErrCredentialExpired) || !strings.Contains(err.Error(), "mint a new one") {
		t.Errorf("Connect with expired creds = %v", err)
	}
}
