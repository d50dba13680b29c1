package userauth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/broker/brokertest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

const testSpace = wire.Space("main")

// testNow is the fixed clock of the bearer tests.
var testNow = time.Unix(1_800_000_000, 0)

func newTestIssuer(t *testing.T) *Issuer {
	t.Helper()
	iss, err := LoadOrCreateIssuer(filepath.Join(t.TempDir(), "issuer.json"), testSpace)
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

// storeSeq gives each test store a space of its own.
var storeSeq atomic.Int64

// newTestStore makes an empty user-auth store on js as provisioning makes one, for a space of its
// own.
func newTestStore(t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	sp := wire.Space(fmt.Sprintf("test%d", storeSeq.Add(1)))
	if _, err := js.CreateStream(t.Context(), space.UserAuthStoreConfig(sp)); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), string(meshwire.UserAuthBucket(sp)))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// newPeople opens the people ledger in kv.
func newPeople(t *testing.T, kv jetstream.KeyValue) *People {
	t.Helper()
	p, err := OpenPeople(kv)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newTestPeople returns an empty people ledger on a broker of the test's own.
func newTestPeople(t *testing.T) *People {
	t.Helper()
	return newPeople(t, newTestStore(t, brokertest.JetStream(t)))
}

// testSecret is the owner secret of the exchange tests.
var testSecret = bytes.Repeat([]byte{7}, OwnerSecretSize)

const testIdP = "https://idp.example"

// ownerOf derives the owner of an IdP subject under testSecret.
func ownerOf(t *testing.T, sub string) string {
	t.Helper()
	o, err := DeriveOwner(testSecret, testIdP, sub)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// identity is one IdP token the fake verifier accepts.
type identity struct {
	sub string
	exp time.Time
}

// fakeIdP is an IdentityVerifier over a table of tokens: our interface, not an IdP.
type fakeIdP struct {
	mu     sync.Mutex
	tokens map[string]identity
}

func (f *fakeIdP) add(token, sub string, exp time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tokens == nil {
		f.tokens = make(map[string]identity)
	}
	f.tokens[token] = identity{sub, exp}
}

func (f *fakeIdP) VerifyIdentity(_ context.Context, tok string) (string, string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.tokens[tok]
	if !ok {
		return "", "", time.Time{}, fmt.Errorf("unknown idp token")
	}
	return testIdP, id.sub, id.exp, nil
}

// fakeRoots is a RootCredentials keeping one root per incarnation in memory.
type fakeRoots struct {
	mu          sync.Mutex
	roots       map[string]string // owner.actor.uid -> credential id
	revoked     map[string]bool   // credential id -> revoked
	unavailable bool
	n           int
}

func (f *fakeRoots) EnsureRoot(_ context.Context, owner, actor string, uid wire.LifecycleUID) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unavailable {
		return "", fmt.Errorf("kv down: %w", ErrUnavailable)
	}
	if f.roots == nil {
		f.roots, f.revoked = make(map[string]string), make(map[string]bool)
	}
	key := owner + "." + actor + "." + string(uid)
	id, ok := f.roots[key]
	if !ok {
		f.n++
		id = fmt.Sprintf("root%d", f.n)
		f.roots[key] = id
	}
	if f.revoked[id] {
		return "", fmt.Errorf("root %s is revoked", id)
	}
	return id, nil
}

func (f *fakeRoots) CheckRoot(_ context.Context, owner, actor string, uid wire.LifecycleUID, cred string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.roots[owner+"."+actor+"."+string(uid)] != cred {
		return fmt.Errorf("credential %s is not the head's current root", cred)
	}
	if f.revoked[cred] {
		return fmt.Errorf("credential %s is revoked", cred)
	}
	return nil
}

func (f *fakeRoots) revoke(cred string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[cred] = true
}

// fakeManagers is a ManagerSelector with one live instance per owner.
type fakeManagers struct {
	live map[string]wire.LifecycleUID
}

func (f *fakeManagers) SelectManager(_ context.Context, owner string, requested wire.LifecycleUID) (wire.LifecycleUID, error) {
	inst, ok := f.live[owner]
	if !ok || (requested != "" && requested != inst) {
		return "", fmt.Errorf("no live manager")
	}
	return inst, nil
}

func (f *fakeManagers) CheckManager(_ context.Context, owner string, inst wire.LifecycleUID) error {
	if f.live[owner] != inst {
		return fmt.Errorf("manager %s is gone", inst)
	}
	return nil
}

// rig is an exchange behind both faces on real sockets.
type rig struct {
	ex       *Exchange
	idp      *fakeIdP
	roots    *fakeRoots
	people   *People
	js       jetstream.JetStream // the people ledger's connection
	cap      string
	loopback *httptest.Server
	public   *httptest.Server
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{idp: &fakeIdP{}, roots: &fakeRoots{}, js: brokertest.JetStream(t), cap: NewCap()}
	r.people = newPeople(t, newTestStore(t, r.js))
	iss := newTestIssuer(t)
	r.ex = &Exchange{Space: testSpace, Issuer: iss, People: r.people, Identity: r.idp, OwnerSecret: testSecret, Roots: r.roots}
	routes := map[string]Handler{"/exchange": r.ex.Handler()}
	opts := FaceOptions{Issuer: iss, MeshDocument: map[string]string{"space": "main"}}
	lf, err := NewLoopbackFace(r.cap, routes, opts)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := NewPublicFace(routes, PublicOptions{FaceOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	r.loopback, r.public = httptest.NewServer(lf), httptest.NewServer(pf)
	t.Cleanup(r.loopback.Close)
	t.Cleanup(r.public.Close)
	return r
}

// grantHuman grants an interactive row to the IdP subject sub and registers the IdP token
// "idp-<sub>" for it, valid for an hour.
func (r *rig) grantHuman(t *testing.T, sub, actor string, scope ...string) *Row {
	t.Helper()
	row, err := r.people.Grant(t.Context(), &Row{Owner: ownerOf(t, sub), Actor: actor, Scope: scope, AllowSubscribe: []string{">"}, AllowPublish: []string{">"}})
	if err != nil {
		t.Fatal(err)
	}
	r.idp.add("idp-"+sub, sub, time.Now().Add(time.Hour))
	return row
}

// post sends a JSON body to srv at path, with the cap when cap is non-empty.
func post(t *testing.T, srv *httptest.Server, path, cap string, body any) (int, []byte) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if cap != "" {
		req.Header.Set("Authorization", "Bearer "+cap)
	}
	return do(t, srv, req)
}

func do(t *testing.T, srv *httptest.Server, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// exchangeOK posts an exchange that must succeed and returns the verified claims.
func (r *rig) exchangeOK(t *testing.T, srv *httptest.Server, body any) (*Claims, string) {
	t.Helper()
	cap := ""
	if srv == r.loopback {
		cap = r.cap
	}
	status, raw := post(t, srv, "/exchange", cap, body)
	if status != http.StatusOK {
		t.Fatalf("exchange %v: status %d %s", body, status, raw)
	}
	var reply exchangeReply
	if err := json.Unmarshal(raw, &reply); err != nil {
		t.Fatal(err)
	}
	c, err := r.ex.Issuer.Verify(reply.Token, time.Now())
	if err != nil {
		t.Fatalf("minted bearer does not verify: %v", err)
	}
	if reply.Owner != c.Subject || reply.Exp != c.Expires {
		t.Fatalf("reply %+v disagrees with its bearer %+v", reply, c)
	}
	return c, reply.Token
}

// signRaw signs an arbitrary header and payload with priv, for bearers the issuer would never
// mint.
func signRaw(t *testing.T, priv ed25519.PrivateKey, header, payload any) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	s := segmentEncoding.EncodeToString(h) + "." + segmentEncoding.EncodeToString(p)
	return s + "." + segmentEncoding.EncodeToString(ed25519.Sign(priv, []byte(s)))
}
