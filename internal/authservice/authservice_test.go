package authservice_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/connz"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

type rig struct {
	m     *meshtest.Mesh
	st    *authservice.State
	kv    jetstream.KeyValue // the space's user-auth store
	doc   authservice.MeshDocument
	ready *authservice.Ready
}

func start(t *testing.T, opts ...meshtest.Option) *rig {
	t.Helper()
	m := meshtest.Start(t, append(opts, func(o *mesh.Options) {
		o.UserAuth = &mesh.UserAuthOptions{DevIdP: true, DevIdPAddr: "127.0.0.1:0"}
	})...)
	dir := m.Dir.UserAuthDir(m.Space)
	kv, err := m.Ledger(m.Space).UserAuthStore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, err := authservice.OpenState(t.Context(), dir, m.Space, kv)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := authservice.ReadReady(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.State().ExchangeURL == "" || m.State().ExchangeURL != ready.PublicURL {
		t.Fatalf("the mesh state's exchange URL %q, the service's %q", m.State().ExchangeURL, ready.PublicURL)
	}
	res, err := http.Get(ready.PublicURL + "/.well-known/cotal-mesh")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := &rig{m: m, st: st, kv: kv, ready: ready}
	if err := json.NewDecoder(res.Body).Decode(&r.doc); err != nil || r.doc.Space != string(m.Space) {
		t.Fatalf("mesh document: %+v %v", r.doc, err)
	}
	return r
}

// login logs user in against the mesh's development IdP and returns an ID token.
func (r *rig) login(t *testing.T, user string) string {
	t.Helper()
	return meshtest.DevLogin(t, &r.doc, user)
}

// grant writes person's cli row.
func (r *rig) grant(t *testing.T, person string, scope []string, read, post []string) *userauth.Row {
	t.Helper()
	owner, err := r.st.Owner(person)
	if err != nil {
		t.Fatal(err)
	}
	row, err := r.st.People.Grant(t.Context(), &userauth.Row{Owner: owner, Actor: "cli", Scope: scope, AllowSubscribe: read, AllowPublish: post, Label: person})
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// rewrite writes row over its interactive row in the store, keeping its incarnation, as a hand
// edit of the store would.
func (r *rig) rewrite(t *testing.T, row userauth.Row) {
	t.Helper()
	raw, _ := json.Marshal(row)
	if _, err := r.kv.Put(t.Context(), "actor."+row.Owner+"."+row.Actor, raw); err != nil {
		t.Fatal(err)
	}
}

// exchange posts body to the public face's /exchange.
func (r *rig) exchange(t *testing.T, body any) (int, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	res, err := http.Post(r.ready.PublicURL+"/exchange", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

func (r *rig) bearer(t *testing.T, idToken string) string {
	t.Helper()
	status, body := r.exchange(t, map[string]any{"idpToken": idToken, "actor": "cli"})
	if status != 200 {
		t.Fatalf("exchange: HTTP %d %s", status, body)
	}
	var out struct {
		Token string `json:"token"`
		Owner string `json:"owner"`
		Exp   int64  `json:"exp"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Token == "" {
		t.Fatalf("exchange reply %s: %v", body, err)
	}
	return out.Token
}

func (r *rig) connect(bearer string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := asBearer(ctx, r.m.URL(), []byte(r.doc.SentinelCreds), bearer)
	if err == nil {
		nc.Close()
	}
	return err
}

// TestPersonConnectsOnABearerTheLedgerRechecks: a person logs in, exchanges their IdP token for a
// bearer and connects through the callout as their own principal; narrowing or re-granting their
// row, or revoking it, refuses the next connect of the same unexpired bearer.
func TestPersonConnectsOnABearerTheLedgerRechecks(t *testing.T) {
	t.Parallel()
	r := start(t)
	ctx := t.Context()
	idToken := r.login(t, "alice")
	if status, _ := r.exchange(t, map[string]any{"idpToken": idToken, "actor": "cli"}); status != 401 {
		t.Fatalf("exchange without a row: HTTP %d", status)
	}
	row := r.grant(t, "alice", []string{"spawn", "supervise"}, []string{"general"}, []string{"general"})
	bearer := r.bearer(t, idToken)

	c := r.m.Dial(t, "alice's bearer", func(opts ...nats.Option) (*nats.Conn, error) {
		return asBearer(ctx, r.m.URL(), []byte(r.doc.SentinelCreds), bearer, opts...)
	})
	mine, err := r.m.Space.ChatSubject(row.Principal(), "general")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := wire.NewPrincipal("local", "bob")
	other, _ := r.m.Space.ChatSubject(bob, "general")
	for subject, want := range map[string]bool{mine: false, other: true} {
		if err := c.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if refused, err := c.Refused("Publish", subject); err != nil || refused != want {
			t.Errorf("publish %s: refused=%v (%v), want %v", subject, refused, err, want)
		}
	}
	// The broker's connection list attributes the connection to alice's principal, as the
	// membership feed and eviction read it.
	snc, acct := r.m.ConnzObserver(t)
	conns, err := connz.List(ctx, snc, acct)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(conns, func(c connz.Conn) bool { p, ok := c.Principal(); return ok && p == row.Principal() }) {
		t.Errorf("no connection of the broker's list is attributed to %s: %+v", row.Principal(), conns)
	}
	c.Close()

	// The same row again: a connect of the bearer still works; a repeat exchange shares its root.
	if err := r.connect(bearer); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	// Narrowed below the bearer's scope: refused.
	narrowed := *row
	narrowed.Scope = []string{"spawn"}
	r.rewrite(t, narrowed)
	if err := r.connect(bearer); err == nil {
		t.Fatal("a bearer wider than its row still connects")
	}
	// Re-granted (a new incarnation): the old bearer is refused, a fresh one connects.
	r.grant(t, "alice", []string{"spawn", "supervise"}, []string{"general"}, []string{"general"})
	if err := r.connect(bearer); err == nil {
		t.Fatal("a bearer of the previous incarnation still connects")
	}
	fresh := r.bearer(t, idToken)
	if err := r.connect(fresh); err != nil {
		t.Fatalf("a fresh bearer: %v", err)
	}
	// Revoked: refused, and the connection alice holds open is closed within 5 s.
	closed := make(chan struct{})
	live := r.m.Dial(t, "alice's live connection", func(opts ...nats.Option) (*nats.Conn, error) {
		opts = append(opts, nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
		return asBearer(ctx, r.m.URL(), []byte(r.doc.SentinelCreds), fresh, opts...)
	})
	owner, _ := r.st.Owner("alice")
	revoked := time.Now()
	if err := r.st.Revoke(ctx, r.m.Ledger(""), owner, "cli"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
		t.Logf("the live connection closed %v after the revocation began", time.Since(revoked))
	case <-time.After(5*time.Second - time.Since(revoked)):
		t.Fatal("a revoked person's live connection is still open 5 s after the revocation")
	}
	if err := live.Publish(mine, []byte("{}")); err == nil {
		t.Error("the revoked person's connection still publishes")
	}
	if err := r.connect(fresh); err == nil {
		t.Fatal("a revoked person's bearer still connects")
	}
	// The sentinel alone, and garbage, are refused.
	for _, tok := range []string{"", "not-a-bearer"} {
		if err := r.connect(tok); err == nil {
			t.Fatalf("bearer %q connected", tok)
		}
	}
}

// TestExchangeRefusesAlike: a wrong token and an unknown actor get the same refusal.
func TestExchangeRefusesAlike(t *testing.T) {
	t.Parallel()
	r := start(t)
	idToken := r.login(t, "carol")
	r.grant(t, "carol", []string{"spawn"}, nil, nil)
	owner, _ := r.st.Owner("carol")
	s1, b1 := r.exchange(t, map[string]any{"idpToken": idToken + "x", "actor": "cli"})
	s2, b2 := r.exchange(t, map[string]any{"idpToken": idToken, "actor": "nobody"})
	s3, b3 := r.exchange(t, map[string]any{"owner": owner, "actor": "cli", "actorToken": "AAAA"})
	if s1 != 401 || s2 != 401 || s3 != 401 || !bytes.Equal(b1, b2) || !bytes.Equal(b2, b3) {
		t.Fatalf("refusals differ: %d %s / %d %s / %d %s", s1, b1, s2, b2, s3, b3)
	}
	if s, _ := r.exchange(t, map[string]any{"idpToken": idToken, "actor": "cli", "view": "admin"}); s == 200 {
		t.Fatal("the public face minted an admin view")
	}
	if !strings.Contains(string(b1), "unauthorized") {
		t.Fatalf("refusal body %s", b1)
	}
}

// TestBearerLifetimeAndForgeries: the credential the callout mints expires with the bearer, so
// the broker drops the connection then; a bearer whose payload was altered, or that another
// space's auth service signed, is refused at connect.
func TestBearerLifetimeAndForgeries(t *testing.T) {
	t.Parallel()
	r := start(t)
	idToken := r.login(t, "dave")
	r.grant(t, "dave", []string{"spawn"}, []string{"general"}, nil)
	status, body := r.exchange(t, map[string]any{"idpToken": idToken, "actor": "cli", "ttlSec": 2})
	if status != 200 {
		t.Fatalf("exchange: HTTP %d %s", status, body)
	}
	var out struct {
		Token string `json:"token"`
		Exp   int64  `json:"exp"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	nc, err := asBearer(ctx, r.m.URL(), []byte(r.doc.SentinelCreds), out.Token, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	select {
	case <-closed:
		if late := time.Since(time.Unix(out.Exp, 0)); late < -time.Second || late > 3*time.Second {
			t.Errorf("the connection closed %s after the bearer's exp", late)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the broker kept the connection past the bearer's expiry")
	}

	// Altered: the payload names another actor; the signature no longer holds.
	fresh := r.bearer(t, idToken)
	parts := strings.Split(fresh, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(payload), `"actor":"cli"`, `"actor":"admin"`, 1)
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(forged))
	if err := r.connect(strings.Join(parts, ".")); err == nil {
		t.Fatal("an altered bearer connected")
	}
	// Signed by another space's keys.
	other, err := userauth.LoadOrCreateIssuer(filepath.Join(t.TempDir(), "issuer.json"), r.m.Space)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := r.issuerOf(t).Verify(fresh, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Sign(*claims)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.connect(foreign); err == nil {
		t.Fatal("a bearer signed by keys the service does not hold connected")
	}
	if err := r.connect(fresh); err != nil {
		t.Fatalf("the genuine bearer: %v", err)
	}
}

// issuerOf loads the service's own bearer keys, to read a bearer's claims.
func (r *rig) issuerOf(t *testing.T) *userauth.Issuer {
	t.Helper()
	iss, err := userauth.LoadOrCreateIssuer(filepath.Join(r.st.Dir, "issuer.json"), r.m.Space)
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

// TestOneAuthServicePerSpace: a second auth service for the space refuses to start while the
// first holds the plane; once it is released, a claim succeeds.
func TestOneAuthServicePerSpace(t *testing.T) {
	t.Parallel()
	r := start(t)
	ctx := t.Context()
	l := r.m.Ledger("")
	_, err := authservice.Start(ctx, authservice.Config{Dir: t.TempDir(), Space: r.m.Space, Keyring: r.m.Keyring(), Ledger: l,
		Server: r.m.URL(), IdP: r.doc.IdP})
	if !errors.Is(err, authstore.ErrPlaneHeld) {
		t.Fatalf("a second auth service: %v, want ErrPlaneHeld", err)
	}
	if _, err := l.HoldPlane(ctx, "another", func(error) {}); !errors.Is(err, authstore.ErrPlaneHeld) {
		t.Fatalf("a second claim: %v", err)
	}
}

// TestPlaneClaimReleasedAndTakenAgain: a released claim can be taken at once.
func TestPlaneClaimReleasedAndTakenAgain(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	l := m.Ledger("")
	h, err := l.HoldPlane(ctx, "first", func(error) { t.Error("the first claim was lost") })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.HoldPlane(ctx, "second", func(error) {}); !errors.Is(err, authstore.ErrPlaneHeld) {
		t.Fatalf("a claim while held: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h2, err := l.HoldPlane(ctx, "second", func(error) {})
	if err != nil {
		t.Fatalf("a claim after release: %v", err)
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestIdPPinned: a start with another identity provider than the one pinned is refused before
// anything runs, and says how to proceed; the pin file is left as it was.
func TestIdPPinned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pin := []byte(`{"issuer":"https://idp.example","clientId":"cotal-cli"}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, "idp.json"), pin, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := authservice.Start(t.Context(), authservice.Config{Dir: dir, Space: "main",
		IdP: authservice.IdP{Issuer: "https://other.example", ClientID: "cotal-cli"}})
	if err == nil || !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("a start with another IdP: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "idp.json")); string(got) != string(pin) {
		t.Fatalf("the pin changed: %s", got)
	}
	if _, err := authservice.Start(t.Context(), authservice.Config{Dir: dir, Space: "main"}); err == nil {
		t.Fatal("a start with no IdP")
	}
}

// TestMeshDocumentAdvertisesTheServer: the mesh document names the broker as --advertised-server
// says, for other machines, and a client refuses to send bearers to it in clear.
func TestMeshDocumentAdvertisesTheServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server string
		ok     bool
	}{{"tls://mesh.example:4222", true}, {"nats://mesh.example:4222", false}} {
		m := meshtest.Start(t, func(o *mesh.Options) {
			o.UserAuth = &mesh.UserAuthOptions{DevIdP: true, DevIdPAddr: "127.0.0.1:0", AdvertisedServer: tc.server}
		})
		doc, err := authservice.FetchMeshDocument(t.Context(), http.DefaultClient, m.State().ExchangeURL)
		switch {
		case tc.ok && (err != nil || doc.Server != tc.server):
			t.Errorf("advertised %s: %+v %v", tc.server, doc, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "without TLS")):
			t.Errorf("a broker in clear beyond loopback: %v", err)
		}
	}
}

// TestConcurrentChangesAllTakeEffect: operators changing one person's row at once (on two nodes
// of a cluster, say) each add what they grant: none is lost to a write over a row it did not
// read, and the last incarnation is readied with its durables.
func TestConcurrentChangesAllTakeEffect(t *testing.T) {
	r := start(t)
	ctx := t.Context()
	owner, err := r.st.Owner("ana")
	if err != nil {
		t.Fatal(err)
	}
	l := r.m.Ledger(r.m.Space)
	roles := []string{"role:a", "role:b", "role:c", "role:d"}
	errs := make([]error, len(roles))
	written := make([]*userauth.Row, len(roles))
	var wg sync.WaitGroup
	for i, role := range roles {
		wg.Go(func() {
			_, written[i], errs[i] = r.st.Change(ctx, l, owner, "cli", func(have *userauth.Row) (*userauth.Row, error) {
				row := &userauth.Row{Owner: owner, Actor: "cli", Label: "ana"}
				if have != nil {
					row = have.Clone()
				}
				row.Scope = append(row.Scope, role)
				return row, nil
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	row, err := r.st.People.Get(ctx, owner, "cli")
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range roles {
		if !row.Has(role) {
			t.Errorf("the row holds %v: %s was lost", row.Scope, role)
		}
	}
	// The last incarnation has its durables; every one it superseded is retired with its own.
	store := r.m.StoreClient(t)
	for _, w := range written {
		_, err := store.JS.Consumer(ctx, r.m.Space.DMStream(), wire.DMDurable(wire.Lifecycle{Principal: w.Principal(), UID: w.LifecycleUID}))
		switch {
		case w.LifecycleUID == row.LifecycleUID && err != nil:
			t.Errorf("the last incarnation's DM durable: %v", err)
		case w.LifecycleUID != row.LifecycleUID && !errors.Is(err, jetstream.ErrConsumerNotFound):
			t.Errorf("the DM durable of superseded incarnation %s: %v, want none", w.LifecycleUID, err)
		}
	}
}
