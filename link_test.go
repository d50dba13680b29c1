package cotal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestCredentialLink: a link made from a credential connects as its principal and joins the
// channels it names; its credential is never quoted by an error; a link beside a creds file is
// refused; a revoked credential's link no longer connects.
func TestCredentialLink(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	cred := m.AgentCred(t, ledger.Request{Name: "alice", Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
	link, err := cotal.CredentialLink(m.URL(), cred.Creds, "general")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, "cotal://") || !strings.HasSuffix(link, "/main?channel=general") {
		t.Fatalf("link %s", link)
	}
	tgt, err := cotal.ParseURL(link)
	if err != nil || tgt.Space != "main" || len(tgt.Channels) != 1 {
		t.Fatalf("the link parses as %+v, %v", tgt, err)
	}
	c, err := cotal.Connect(ctx, link)
	if err != nil {
		t.Fatal(err)
	}
	if c.Principal() != cred.Principal || c.Space() != "main" {
		t.Errorf("connected as %s in %s, want %s in main", c.Principal(), c.Space(), cred.Principal)
	}
	if _, err := c.Post(ctx, "general", []wire.Part{wire.TextPart("hi from a link")}); err != nil {
		t.Errorf("post through the link: %v", err)
	}
	_ = c.Close(ctx)

	secret := strings.TrimPrefix(strings.SplitN(link, "@", 2)[0], "cotal://")
	bad := strings.Replace(link, "channel=general", "channel=bad%20name", 1)
	if _, err := cotal.Connect(ctx, bad); err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[len(secret)-20:]) {
		t.Errorf("a bad link's error quotes its credential, or it connected: %v", err)
	}
	if _, err := cotal.ParseURL(strings.Replace(link, "cotal://", "cotal+x://", 1)); err == nil || strings.Contains(err.Error(), secret[len(secret)-20:]) {
		t.Errorf("a bad scheme's error quotes the credential: %v", err)
	}
	if _, err := cotal.Connect(ctx, link, cotal.WithCredsData(cred.Creds)); !errors.Is(err, cotal.ErrInvalidOption) {
		t.Errorf("a link beside a creds file: %v", err)
	}
	tampered := strings.Replace(link, ".SU", ".SUAA", 1)
	if _, err := cotal.Connect(ctx, tampered); !errors.Is(err, cotal.ErrInvalidOption) {
		t.Errorf("a link with a broken seed: %v", err)
	}

	if _, err := m.Ledger("").Revoke(ctx, cred.LifecycleUID, cred.CredentialID, "test"); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, "the revoked credential's link refused", func() bool {
		c, err := cotal.Connect(ctx, link, cotal.WithConnectAttempts(1))
		if err == nil {
			_ = c.Close(ctx)
			return false
		}
		return errors.Is(err, cotal.ErrNotPermitted)
	})
}
