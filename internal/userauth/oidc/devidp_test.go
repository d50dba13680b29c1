package oidc

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/userauth/devidp"
)

// TestDevIdPLogin runs the whole client against the built-in development provider: discovery, a
// device login approved by script, verification, refresh, and the sessions cache.
// startDevIdP starts a development IdP that lets a client poll as fast as it likes, until the
// test ends, and discovers it.
func startDevIdP(t *testing.T) (*devidp.Server, *Provider) {
	t.Helper()
	idp, err := devidp.Start(t.Context(), devidp.Options{Interval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Close() }) // a close error after the test has no reader
	p, err := Discover(t.Context(), nil, idp.URL())
	if err != nil {
		t.Fatal(err)
	}
	return idp, p
}

func TestDevIdPLogin(t *testing.T) {
	idp, p := startDevIdP(t)
	dc, err := p.StartDevice(t.Context(), nil, devidp.DefaultClientID, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Polls are instant; the person approves between the first and the second poll.
	polls := 0
	p.sleep = func(ctx context.Context, _ time.Duration) error {
		polls++
		if polls == 2 {
			return devidp.Approve(ctx, nil, idp.URL(), dc.UserCode, "alice")
		}
		return ctx.Err()
	}
	toks, err := p.PollDevice(t.Context(), nil, devidp.DefaultClientID, dc)
	if err != nil {
		t.Fatal(err)
	}
	if polls != 2 {
		t.Errorf("polls = %d, want 2 (one pending, one approved)", polls)
	}
	if _, err := p.PollDevice(t.Context(), nil, devidp.DefaultClientID, dc); !errors.Is(err, ErrInvalidGrant) {
		t.Errorf("second redemption of the device code = %v, want ErrInvalidGrant", err)
	}

	v := NewVerifier(p, devidp.DefaultClientID, nil)
	id, err := v.Verify(t.Context(), toks.IDToken)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "alice" || id.Name != "alice" || id.Issuer != idp.URL() {
		t.Fatalf("identity = %+v", id)
	}
	if _, err := NewVerifier(p, "another-client", nil).Verify(t.Context(), toks.IDToken); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Verify for another client = %v, want ErrInvalidToken", err)
	}

	// Refresh rotates the refresh token; the old one is spent.
	fresh, err := p.Refresh(t.Context(), nil, devidp.DefaultClientID, toks.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.RefreshToken == "" || fresh.RefreshToken == toks.RefreshToken {
		t.Errorf("refresh token not rotated")
	}
	if id2, err := v.Verify(t.Context(), fresh.IDToken); err != nil || id2.Subject != "alice" {
		t.Errorf("refreshed token: %+v, %v", id2, err)
	}
	if _, err := p.Refresh(t.Context(), nil, devidp.DefaultClientID, toks.RefreshToken); !errors.Is(err, ErrInvalidGrant) {
		t.Errorf("reused refresh token = %v, want ErrInvalidGrant", err)
	}

	// The CLI's cache: store the login, reload it, and get a fresh ID token.
	path := filepath.Join(t.TempDir(), ".cotal", "idp-sessions.json")
	sess := Session{
		Issuer: p.Issuer, ClientID: devidp.DefaultClientID, IDToken: fresh.IDToken, RefreshToken: fresh.RefreshToken,
		Subject: id.Subject, Name: id.Name, ExpiresAt: id.Expires,
	}
	ss, err := LoadSessions(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Put("nats://127.0.0.1:4222", sess); err != nil {
		t.Fatal(err)
	}
	if err := ss.Save(path); err != nil {
		t.Fatal(err)
	}
	ss, err = LoadSessions(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ss.Get("nats://127.0.0.1:4222")
	if err != nil {
		t.Fatal(err)
	}
	tok, refreshed, err := FreshIDToken(t.Context(), nil, p, &got)
	if err != nil || refreshed || tok != fresh.IDToken {
		t.Fatalf("FreshIDToken with a live token = refreshed %v, %v; want the cached token", refreshed, err)
	}
	got.ExpiresAt = time.Now().Add(30 * time.Second) // under a minute left: refresh
	tok, refreshed, err = FreshIDToken(t.Context(), nil, p, &got)
	if err != nil || !refreshed || got.IDToken != tok || got.RefreshToken == fresh.RefreshToken {
		t.Fatalf("FreshIDToken near expiry = refreshed %v, %v; want a new token stored in the session", refreshed, err)
	}
	if time.Until(got.ExpiresAt) < 5*time.Minute {
		t.Errorf("refreshed session expires at %v, want the new token's exp", got.ExpiresAt)
	}
	got.ExpiresAt, got.RefreshToken = time.Now(), ""
	if _, _, err := FreshIDToken(t.Context(), nil, p, &got); !errors.Is(err, ErrNoRefreshToken) {
		t.Errorf("FreshIDToken without refresh token = %v, want ErrNoRefreshToken", err)
	}
}

func TestDevIdPDenied(t *testing.T) {
	idp, p := startDevIdP(t)
	dc, err := p.StartDevice(t.Context(), nil, devidp.DefaultClientID, []string{"openid"})
	if err != nil {
		t.Fatal(err)
	}
	// The person presses Deny on the approval page.
	resp, err := http.PostForm(idp.URL()+"/device", url.Values{"user_code": {dc.UserCode}, "user": {"alice"}, "action": {"deny"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("deny: status %d", resp.StatusCode)
	}
	p.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	if _, err := p.PollDevice(t.Context(), nil, devidp.DefaultClientID, dc); !errors.Is(err, ErrAccessDenied) {
		t.Errorf("PollDevice = %v, want ErrAccessDenied", err)
	}
}

// TestRevoke: a revoked refresh token redeems nothing more; revoking an unknown one is answered
// alike (RFC 7009 §2.2); another client's revocation and a provider without the endpoint are
// refused.
func TestRevoke(t *testing.T) {
	idp, p := startDevIdP(t)
	if p.RevocationEndpoint != idp.URL()+"/revoke" {
		t.Fatalf("revocation endpoint %q", p.RevocationEndpoint)
	}
	dc, err := p.StartDevice(t.Context(), nil, devidp.DefaultClientID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := devidp.Approve(t.Context(), nil, idp.URL(), dc.UserCode, "alice"); err != nil {
		t.Fatal(err)
	}
	toks, err := p.PollDevice(t.Context(), nil, devidp.DefaultClientID, dc)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Revoke(t.Context(), nil, "another-client", toks.RefreshToken); err == nil {
		t.Error("another client revoked the token")
	}
	if err := p.Revoke(t.Context(), nil, devidp.DefaultClientID, toks.RefreshToken); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Refresh(t.Context(), nil, devidp.DefaultClientID, toks.RefreshToken); !errors.Is(err, ErrInvalidGrant) {
		t.Errorf("a revoked refresh token redeemed: %v", err)
	}
	if err := p.Revoke(t.Context(), nil, devidp.DefaultClientID, toks.RefreshToken); err != nil {
		t.Errorf("revoking a spent token again: %v, want success", err)
	}
	none := *p
	none.RevocationEndpoint = ""
	if err := none.Revoke(t.Context(), nil, devidp.DefaultClientID, toks.RefreshToken); !errors.Is(err, ErrNoRevocation) {
		t.Errorf("revoke without an endpoint: %v", err)
	}
}

// devLogin logs user in at the development IdP with the device flow and returns their session.
func devLogin(t *testing.T, idp *devidp.Server, p *Provider, user string) Session {
	t.Helper()
	dc, err := p.StartDevice(t.Context(), nil, devidp.DefaultClientID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := devidp.Approve(t.Context(), nil, idp.URL(), dc.UserCode, user); err != nil {
		t.Fatal(err)
	}
	toks, err := p.PollDevice(t.Context(), nil, devidp.DefaultClientID, dc)
	if err != nil {
		t.Fatal(err)
	}
	id, err := NewVerifier(p, devidp.DefaultClientID, nil).Verify(t.Context(), toks.IDToken)
	if err != nil {
		t.Fatal(err)
	}
	return Session{Issuer: p.Issuer, ClientID: devidp.DefaultClientID, IDToken: toks.IDToken, RefreshToken: toks.RefreshToken,
		Subject: id.Subject, Name: id.Name, ExpiresAt: id.Expires}
}

// TestRenewStoredShared holds one stored login in several places at once, as two commands on one
// machine do: the provider rotates refresh tokens, so only one holder may refresh and the rest
// must adopt its renewal; a logout or another person's login ends the renewals, and nothing is
// saved back over them.
func TestRenewStoredShared(t *testing.T) {
	idp, p := startDevIdP(t)
	path := filepath.Join(t.TempDir(), ".cotal", "idp-sessions.json")
	const key = "http://127.0.0.1:9"
	store := func(s Session) {
		t.Helper()
		if err := UpdateSessions(t.Context(), path, func(all *Sessions) error { return all.Put(key, s) }); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() (Session, error) {
		all, err := LoadSessions(path)
		if err != nil {
			t.Fatal(err)
		}
		return all.Get(key)
	}
	login := devLogin(t, idp, p, "alice")
	login.ExpiresAt = time.Now().Add(30 * time.Second) // under a minute left: due for renewal
	store(login)

	a, b := login, login
	tokA, err := RenewStored(t.Context(), nil, p, path, key, &a)
	// (The development IdP signs the same ID token within one second: the rotated refresh token
	// is what shows a refresh.)
	if err != nil || a.RefreshToken == login.RefreshToken {
		t.Fatalf("first holder's renewal = %v (refresh token rotated %v)", err, a.RefreshToken != login.RefreshToken)
	}
	if got, err := stored(); err != nil || got.RefreshToken != a.RefreshToken || got.IDToken != tokA {
		t.Fatalf("stored login after the renewal = %v; want the renewed one", err)
	}
	// The second holder's refresh token is spent: refreshing with it is what failed before.
	spent := login
	if _, _, err := FreshIDToken(t.Context(), nil, p, &spent); !errors.Is(err, ErrInvalidGrant) {
		t.Fatalf("refresh with the spent token = %v, want ErrInvalidGrant", err)
	}
	if tokB, err := RenewStored(t.Context(), nil, p, path, key, &b); err != nil || tokB != tokA || b.RefreshToken != a.RefreshToken {
		t.Fatalf("second holder's renewal = %v (same token %v); want the first holder's renewal adopted", err, tokB == tokA)
	}

	// Holders due at once: one refreshes, every other waits for the lock and adopts it.
	due, _ := stored()
	due.ExpiresAt = time.Now().Add(30 * time.Second)
	store(due)
	toks := make([]string, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			s := due
			toks[i], errs[i] = RenewStored(t.Context(), nil, p, path, key, &s)
		})
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Fatalf("concurrent holder %d = %v (token shared %v)", i, errs[i], toks[i] == toks[0])
		}
	}
	if got, err := stored(); err != nil || got.RefreshToken == due.RefreshToken || got.IDToken != toks[0] {
		t.Fatalf("stored login after the concurrent renewals = %v; want the one renewal", err)
	}

	// A holder whose own renewal was not saved keeps its newer refresh token rather than adopt
	// the older, spent one the file still holds.
	mine, _ := stored()
	mine.ExpiresAt = time.Now().Add(30 * time.Second)
	older := mine
	older.ExpiresAt, older.RefreshToken = time.Now().Add(20*time.Second), login.RefreshToken // spent above
	store(older)
	if _, err := RenewStored(t.Context(), nil, p, path, key, &mine); err != nil {
		t.Fatalf("renewal beside an older stored login = %v; want the holder's own refresh token used", err)
	}

	// A live token is handed out without the file.
	live, _ := stored()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if tok, err := RenewStored(t.Context(), nil, p, path, key, &live); err != nil || tok != live.IDToken {
		t.Fatalf("live token = %v, want it handed out as it is", err)
	}

	// Logged out: the holder's renewal fails and does not save the login back.
	live.ExpiresAt = time.Now()
	if _, err := RenewStored(t.Context(), nil, p, path, key, &live); !errors.Is(err, ErrLoginReplaced) {
		t.Fatalf("renewal after a logout = %v, want ErrLoginReplaced", err)
	}
	if _, err := stored(); !errors.Is(err, ErrNoSession) {
		t.Fatalf("stored login after a refused renewal = %v, want none", err)
	}
	// Another person logged in under the key: alice's holder stops; bob's login is untouched.
	bob := devLogin(t, idp, p, "bob")
	store(bob)
	if _, err := RenewStored(t.Context(), nil, p, path, key, &live); !errors.Is(err, ErrLoginReplaced) {
		t.Fatalf("renewal over another person's login = %v, want ErrLoginReplaced", err)
	}
	if got, err := stored(); err != nil || got.Subject != "bob" || got.RefreshToken != bob.RefreshToken {
		t.Fatalf("bob's stored login = %+v, %v; want it untouched", got.Subject, err)
	}
}
