package cotal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
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
