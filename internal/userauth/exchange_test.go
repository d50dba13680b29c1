package userauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/wire"
)

func TestHumanExchange(t *testing.T) {
	r := newRig(t)
	row := r.grantHuman(t, "alice", "cli", "spawn")
	c, token := r.exchangeOK(t, r.loopback, map[string]any{"idpToken": "idp-alice", "actor": "cli"})
	if c.Subject != ownerOf(t, "alice") || c.Act.Actor != "cli" || c.Act.LifecycleUID != row.LifecycleUID || c.Act.CredentialID == "" || c.Act.View != "" {
		t.Fatalf("claims %+v", c)
	}
	if c.Lifetime() != MaxBearerLifetime {
		t.Fatalf("lifetime %s, want the %s default", c.Lifetime(), MaxBearerLifetime)
	}
	g, err := r.ex.Authorize(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	if g.Row.Kind != KindInteractive || g.Claims.Act.Actor != "cli" {
		t.Fatalf("grant %+v", g)
	}
	// A second exchange re-uses the incarnation's one root credential.
	c2, _ := r.exchangeOK(t, r.public, map[string]any{"idpToken": "idp-alice", "actor": "cli"})
	if c2.Act.CredentialID != c.Act.CredentialID {
		t.Fatalf("root credential %s then %s", c.Act.CredentialID, c2.Act.CredentialID)
	}
}

func TestHumanExchangeLifetime(t *testing.T) {
	r := newRig(t)
	r.grantHuman(t, "alice", "cli")
	r.idp.add("idp-short", "alice", time.Now().Add(100*time.Second))
	r.idp.add("idp-expiring", "alice", time.Now().Add(500*time.Millisecond))
	tests := []struct {
		name string
		body map[string]any
		want time.Duration
	}{
		{"asked for less", map[string]any{"idpToken": "idp-alice", "actor": "cli", "ttlSec": 60}, 60 * time.Second},
		{"asked for more", map[string]any{"idpToken": "idp-alice", "actor": "cli", "ttlSec": 5000}, MaxBearerLifetime},
		{"capped by the idp token", map[string]any{"idpToken": "idp-short", "actor": "cli"}, 100 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := r.exchangeOK(t, r.loopback, tt.body)
			// The idp-token cap is measured against a clock that moved on a little.
			if got := c.Lifetime(); got > tt.want || got < tt.want-2*time.Second {
				t.Fatalf("lifetime %s, want %s", got, tt.want)
			}
		})
	}
	if status, _ := post(t, r.loopback, "/exchange", r.cap, map[string]any{"idpToken": "idp-expiring", "actor": "cli"}); status != 401 {
		t.Fatalf("an idp token with under a second left: %d, want 401", status)
	}
	// The operator's cap shortens every bearer, whatever was asked.
	r.ex.Lifetime = 45 * time.Second
	if c, _ := r.exchangeOK(t, r.loopback, map[string]any{"idpToken": "idp-alice", "actor": "cli", "ttlSec": 600}); c.Lifetime() != 45*time.Second {
		t.Fatalf("lifetime %s under a 45s cap", c.Lifetime())
	}
}

func TestExchangeRefusalsLookAlike(t *testing.T) {
	r := newRig(t)
	r.grantHuman(t, "alice", "cli")
	agentToken := grantAgent(t, r, ownerOf(t, "alice"), "bot", "")

	refusals := map[string]map[string]any{
		"human, wrong idp token":   {"idpToken": "forged", "actor": "cli"},
		"human, unknown actor":     {"idpToken": "idp-alice", "actor": "ghost"},
		"human, managed actor":     {"idpToken": "idp-alice", "actor": "bot"},
		"agent, wrong actor token": {"owner": ownerOf(t, "alice"), "actor": "bot", "actorToken": "wrong"},
		"agent, unknown actor":     {"owner": ownerOf(t, "alice"), "actor": "ghost", "actorToken": agentToken},
		"agent, unknown owner":     {"owner": ownerB, "actor": "bot", "actorToken": agentToken},
		"agent, interactive actor": {"owner": ownerOf(t, "alice"), "actor": "cli", "actorToken": agentToken},
	}
	faces := []struct {
		name, cap string
		srv       func() *httptest.Server
	}{
		{"loopback", r.cap, func() *httptest.Server { return r.loopback }},
		{"public", "", func() *httptest.Server { return r.public }},
	}
	var first []byte
	for name, body := range refusals {
		for _, face := range faces {
			t.Run(name+" on "+face.name, func(t *testing.T) {
				status, raw := post(t, face.srv(), "/exchange", face.cap, body)
				if status != http.StatusUnauthorized {
					t.Fatalf("status %d %s, want 401", status, raw)
				}
				if first == nil {
					first = raw
				}
				if string(raw) != string(first) {
					t.Fatalf("body %q differs from another refusal's %q", raw, first)
				}
			})
		}
	}
	if strings.TrimSpace(string(first)) != `{"error":"unauthorized"}` {
		t.Fatalf("refusal body %s", first)
	}
}

// grantAgent writes a managed row for (owner, actor) under parent and returns its actor token.
func grantAgent(t *testing.T, r *rig, owner, actor, parent string, scope ...string) string {
	t.Helper()
	token := "secret-" + actor
	sum := sha256.Sum256([]byte(token))
	_, err := r.people.GrantManaged(t.Context(), &Row{Owner: owner, Actor: actor, Parent: parent, Scope: scope, AllowSubscribe: []string{"team.>"}, AllowPublish: []string{"team.a"}, TokenHash: hex.EncodeToString(sum[:]), LifecycleUID: wire.NewLifecycleUID()})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestAgentExchange(t *testing.T) {
	r := newRig(t)
	owner := ownerOf(t, "alice")
	r.grantHuman(t, "alice", "boss", "spawn")
	token := grantAgent(t, r, owner, "bot", owner+".boss", "spawn")
	for _, ttl := range []any{nil, 900, 60} {
		body := map[string]any{"owner": owner, "actor": "bot", "actorToken": token}
		if ttl != nil {
			body["ttlSec"] = ttl
		}
		c, bearer := r.exchangeOK(t, r.loopback, body)
		if c.Expires-c.IssuedAt > 300 {
			t.Fatalf("ttlSec %v: an agent bearer lives %ds, over 300", ttl, c.Expires-c.IssuedAt)
		}
		if c.Act.Parent != owner+".boss" {
			t.Fatalf("act.parent %q", c.Act.Parent)
		}
		if _, err := r.ex.Authorize(t.Context(), bearer); err != nil {
			t.Fatal(err)
		}
	}
	_, bearer := r.exchangeOK(t, r.loopback, map[string]any{"owner": owner, "actor": "bot", "actorToken": token})

	// Narrowing the spawner below the agent fails the agent's next exchange and connect.
	if _, err := r.people.Grant(t.Context(), &Row{Owner: owner, Actor: "boss", AllowSubscribe: []string{">"}, AllowPublish: []string{">"}}); err != nil {
		t.Fatal(err)
	}
	if status, _ := post(t, r.loopback, "/exchange", r.cap, map[string]any{"owner": owner, "actor": "bot", "actorToken": token}); status != 401 {
		t.Fatalf("exchange after the spawner narrowed: %d, want 401", status)
	}
	if _, err := r.ex.Authorize(t.Context(), bearer); !errors.Is(err, ErrDenied) {
		t.Fatalf("Authorize after the spawner narrowed: %v", err)
	}
}

func TestExchangeMalformed(t *testing.T) {
	r := newRig(t)
	r.grantHuman(t, "alice", "cli")
	for name, body := range map[string]string{
		"both forms":             `{"idpToken":"idp-alice","owner":"` + ownerA + `","actor":"cli","actorToken":"x"}`,
		"neither form":           `{"actor":"cli"}`,
		"unknown field":          `{"idpToken":"idp-alice","actor":"cli","scope":["admin"]}`,
		"no actor":               `{"idpToken":"idp-alice"}`,
		"bad actor":              `{"idpToken":"idp-alice","actor":"a.b"}`,
		"agent without token":    `{"owner":"` + ownerA + `","actor":"bot"}`,
		"agent owner not u_":     `{"owner":"alice","actor":"bot","actorToken":"x"}`,
		"zero ttl":               `{"idpToken":"idp-alice","actor":"cli","ttlSec":0}`,
		"fractional ttl":         `{"idpToken":"idp-alice","actor":"cli","ttlSec":1.5}`,
		"unknown view":           `{"idpToken":"idp-alice","actor":"cli","view":"observer"}`,
		"instance without view":  `{"idpToken":"idp-alice","actor":"cli","managerInstanceId":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}`,
		"trailing data":          `{"idpToken":"idp-alice","actor":"cli"} {}`,
		"not an object":          `[]`,
		"idpToken of wrong type": `{"idpToken":1,"actor":"cli"}`,
	} {
		t.Run(name, func(t *testing.T) {
			status, raw := post(t, r.loopback, "/exchange", r.cap, body)
			if status != http.StatusBadRequest || !strings.HasPrefix(string(raw), `{"error":`) {
				t.Fatalf("status %d %s, want 400 {error}", status, raw)
			}
		})
	}
}

func TestExchangeViews(t *testing.T) {
	r := newRig(t)
	r.ex.Managers = &fakeManagers{live: map[string]wire.LifecycleUID{ownerOf(t, "alice"): "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm"}}
	r.grantHuman(t, "root", "cli", "admin", "spawn")
	r.grantHuman(t, "alice", "cli", "spawn")
	r.grantHuman(t, "sup", "cli", "supervise")
	agentToken := grantAgent(t, r, ownerOf(t, "alice"), "bot", "")
	tests := []struct {
		name   string
		public bool
		body   map[string]any
		want   int
	}{
		{"admin on loopback", false, map[string]any{"idpToken": "idp-root", "actor": "cli", "view": "admin"}, 200},
		{"admin on the public face", true, map[string]any{"idpToken": "idp-root", "actor": "cli", "view": "admin"}, 401},
		{"purger on the public face", true, map[string]any{"idpToken": "idp-root", "actor": "cli", "view": "purger"}, 401},
		{"channel-writer on the public face", true, map[string]any{"idpToken": "idp-root", "actor": "cli", "view": "channel-writer"}, 200},
		{"channel-purger without admin", true, map[string]any{"idpToken": "idp-alice", "actor": "cli", "view": "channel-purger"}, 401},
		{"admin without admin", false, map[string]any{"idpToken": "idp-alice", "actor": "cli", "view": "admin"}, 401},
		{"deployer with spawn", false, map[string]any{"idpToken": "idp-alice", "actor": "cli", "view": "deployer"}, 200},
		// A remote manager's authority is the manager-service-authority route, never a bearer.
		{"manager-service with supervise", false, map[string]any{"idpToken": "idp-sup", "actor": "cli", "view": "manager-service"}, 400},
		{"manager-service on the public face", true, map[string]any{"idpToken": "idp-sup", "actor": "cli", "view": "manager-service"}, 400},
		{"manager-caller on the public face", true, map[string]any{"idpToken": "idp-alice", "actor": "cli", "view": "manager-caller"}, 200},
		{"manager-caller naming a dead instance", true, map[string]any{"idpToken": "idp-alice", "actor": "cli", "view": "manager-caller", "managerInstanceId": "dddddddddddddddddddddddddddddddd"}, 401},
		{"manager-caller without a live manager", false, map[string]any{"idpToken": "idp-root", "actor": "cli", "view": "manager-caller"}, 401},
		{"agent manager-caller", true, map[string]any{"owner": ownerOf(t, "alice"), "actor": "bot", "actorToken": agentToken, "view": "manager-caller"}, 200},
		{"agent admin", false, map[string]any{"owner": ownerOf(t, "alice"), "actor": "bot", "actorToken": agentToken, "view": "admin"}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cap := r.loopback, r.cap
			if tt.public {
				srv, cap = r.public, ""
			}
			status, raw := post(t, srv, "/exchange", cap, tt.body)
			if status != tt.want {
				t.Fatalf("status %d %s, want %d", status, raw, tt.want)
			}
			if status == 200 {
				c, bearer := r.exchangeOK(t, srv, tt.body)
				if string(c.Act.View) != tt.body["view"] {
					t.Fatalf("act.view %q", c.Act.View)
				}
				if c.Act.View == ViewManagerCaller && c.Act.ManagerInstanceID != "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm" {
					t.Fatalf("act.managerInstanceId %q", c.Act.ManagerInstanceID)
				}
				if _, err := r.ex.Authorize(t.Context(), bearer); err != nil {
					t.Fatalf("Authorize: %v", err)
				}
			}
		})
	}
}

func TestAuthorizeFollowsTheLedger(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, r *rig, c *Claims)
	}{
		{"row narrowed", func(t *testing.T, r *rig, c *Claims) {
			// A narrowed row keeps its lifecycle only if written by hand; a re-grant rotates it.
			row, _ := r.people.Get(t.Context(), c.Act.Owner, c.Act.Actor)
			row.Scope = []string{"spawn"}
			rewriteRow(t, r.people, row)
		}},
		{"row re-granted", func(t *testing.T, r *rig, c *Claims) {
			if _, err := r.people.Grant(t.Context(), &Row{Owner: c.Act.Owner, Actor: c.Act.Actor, Scope: []string{"spawn", "admin"}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"row deleted", func(t *testing.T, r *rig, c *Claims) {
			if err := r.people.Revoke(t.Context(), c.Act.Owner, c.Act.Actor); err != nil {
				t.Fatal(err)
			}
		}},
		{"root credential revoked", func(t *testing.T, r *rig, c *Claims) { r.roots.revoke(c.Act.CredentialID) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.grantHuman(t, "alice", "cli", "spawn", "admin")
			body := map[string]any{"idpToken": "idp-alice", "actor": "cli"}
			c, bearer := r.exchangeOK(t, r.loopback, body)
			if _, err := r.ex.Authorize(t.Context(), bearer); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			tt.change(t, r, c)
			g, err := r.ex.Authorize(t.Context(), bearer)
			if !errors.Is(err, ErrDenied) {
				t.Fatalf("after the change: %+v, %v; want a refusal", g, err)
			}
		})
	}
}

// rewriteRow replaces a row keeping its lifecycle UID, as a hand edit would.
func rewriteRow(t *testing.T, p *People, row *Row) {
	t.Helper()
	row.Ver = rowVer
	if err := row.validate(row.Kind); err != nil {
		t.Fatal(err)
	}
	if _, err := p.writeAt(t.Context(), row, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAuthorizeRefusesForeignBearers(t *testing.T) {
	r := newRig(t)
	r.grantHuman(t, "alice", "cli")
	other := newRig(t)
	other.grantHuman(t, "alice", "cli")
	_, bearer := other.exchangeOK(t, other.loopback, map[string]any{"idpToken": "idp-alice", "actor": "cli"})
	if _, err := r.ex.Authorize(t.Context(), bearer); !errors.Is(err, ErrDenied) {
		t.Fatalf("another issuer's bearer: %v", err)
	}
	if _, err := r.ex.Authorize(t.Context(), "garbage"); !errors.Is(err, ErrDenied) {
		t.Fatalf("garbage: %v", err)
	}
}

func TestExchangeUnavailable(t *testing.T) {
	r := newRig(t)
	r.grantHuman(t, "alice", "cli")
	r.roots.unavailable = true
	status, raw := post(t, r.loopback, "/exchange", r.cap, map[string]any{"idpToken": "idp-alice", "actor": "cli"})
	if status != http.StatusServiceUnavailable {
		t.Fatalf("status %d %s, want 503", status, raw)
	}
	// Nor is a people ledger that does not answer a refusal.
	r = newRig(t)
	r.grantHuman(t, "alice", "cli")
	r.js.Conn().Close()
	if status, raw := post(t, r.loopback, "/exchange", r.cap, map[string]any{"idpToken": "idp-alice", "actor": "cli"}); status != http.StatusServiceUnavailable {
		t.Fatalf("status %d %s with the people ledger down, want 503", status, raw)
	}
}

func TestLoopbackBudgetNeverLocksOutAValidExchange(t *testing.T) {
	r := newRig(t)
	r.grantHuman(t, "alice", "cli")
	bad := map[string]any{"idpToken": "idp-alice", "actor": "ghost"}
	for i := range RefusalBudget {
		if status, _ := post(t, r.loopback, "/exchange", r.cap, bad); status != 401 {
			t.Fatalf("refusal %d: %d, want 401", i+1, status)
		}
	}
	if status, _ := post(t, r.loopback, "/exchange", r.cap, bad); status != 429 {
		t.Fatalf("refusal %d: %d, want 429", RefusalBudget+1, status)
	}
	r.exchangeOK(t, r.loopback, map[string]any{"idpToken": "idp-alice", "actor": "cli"})
}

func TestExchangeMisconfigured(t *testing.T) {
	ex := &Exchange{Space: testSpace}
	status, _ := ex.Handler()(context.Background(), &Incoming{Face: FaceLoopback, Body: []byte(`{}`)})
	if status != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", status)
	}
	if _, err := ex.Authorize(context.Background(), "x"); err == nil {
		t.Fatal("Authorize without an issuer succeeded")
	}
}
