package anchor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/anchor"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

func codeOf(err error) wire.ErrorCode {
	if e, ok := errors.AsType[*wire.EndpointError](err); ok {
		return e.Code
	}
	return ""
}

func signer(t *testing.T, now time.Time) *anchor.Signer {
	t.Helper()
	s, err := anchor.NewSigner(anchor.RoleSessions, []string{"manager"}, "ai.cotal.auth", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUseGates: a key is used only inside its window, for its role, unrevoked, and only for what
// its scope covers; an unknown key, or one the registry cannot read, never verifies.
func TestUseGates(t *testing.T) {
	now := time.Now()
	s := signer(t, now)
	a := s.Anchor
	at := wire.MillisOf(now.Add(time.Minute))
	resolve := func(got *anchor.Anchor, err error) anchor.Resolver {
		return func(string) (*anchor.Anchor, error) { return got, err }
	}
	if _, err := anchor.Use(resolve(&a, nil), a.KeyID, anchor.RoleSessions, at); err != nil {
		t.Fatalf("a current key: %v", err)
	}
	revoked := a
	revoked.Revoked = true
	garbled := a
	garbled.PublicKey = "not a key"
	for _, tc := range []struct {
		name    string
		resolve anchor.Resolver
		keyID   string
		role    anchor.Role
		at      wire.EpochMillis
		code    wire.ErrorCode
	}{
		{"no key named", resolve(&a, nil), "", anchor.RoleSessions, at, wire.CodePermissionDenied},
		{"an unknown key", resolve(nil, nil), a.KeyID, anchor.RoleSessions, at, wire.CodePermissionDenied},
		{"an unreadable registry", resolve(nil, errors.New("down")), a.KeyID, anchor.RoleSessions, at, wire.CodeUnavailable},
		{"a garbled record", resolve(&garbled, nil), a.KeyID, anchor.RoleSessions, at, wire.CodeFailedPrecondition},
		{"a revoked key", resolve(&revoked, nil), a.KeyID, anchor.RoleSessions, at, wire.CodePermissionDenied},
		{"another role", resolve(&a, nil), a.KeyID, anchor.RoleReceipts, at, wire.CodePermissionDenied},
		{"before its window", resolve(&a, nil), a.KeyID, anchor.RoleSessions, a.ValidFrom - 1, wire.CodePermissionDenied},
		{"after its window", resolve(&a, nil), a.KeyID, anchor.RoleSessions, a.ValidTo + 1, wire.CodePermissionDenied},
	} {
		if _, err := anchor.Use(tc.resolve, tc.keyID, tc.role, tc.at); codeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	for subject, covered := range map[string]bool{"manager": true, "manager.sub": true, "managers": false, "other": false} {
		if err := a.Covers(anchor.RoleSessions, subject); (err == nil) != covered {
			t.Errorf("scope [manager] covers %s: %v", subject, err)
		}
	}
	if err := a.Covers(anchor.RoleHandles, "manager"); err == nil {
		t.Error("a role with no scope entries covered a subject")
	}
}

// TestSignatures: a signature verifies over what was signed and nothing else.
func TestSignatures(t *testing.T) {
	s := signer(t, time.Now())
	input, err := anchor.SignatureInput([]byte(`{"b":2,"a":1,"sig":"ignored"}`))
	if err != nil || string(input) != `{"a":1,"b":2}` {
		t.Fatalf("signature input %s, %v", input, err)
	}
	sig, err := s.Sign(input)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Anchor.Verify(input, sig); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{sig[:len(sig)-1], sig + "=", "x" + sig[1:]} {
		if err := s.Anchor.Verify(input, bad); codeOf(err) != wire.CodePermissionDenied {
			t.Errorf("sig %q: %v", bad, err)
		}
	}
	if err := s.Anchor.Verify([]byte(`{"a":1,"b":3}`), sig); codeOf(err) != wire.CodePermissionDenied {
		t.Errorf("another input: %v", err)
	}
}

// TestCurrency runs the window rules at their edges.
func TestCurrency(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	ms := wire.MillisOf(now)
	nbf := func(v wire.EpochMillis) *wire.EpochMillis { return &v }
	for _, tc := range []struct {
		name          string
		iat           wire.EpochMillis
		nbf           *wire.EpochMillis
		exp           wire.EpochMillis
		code          wire.ErrorCode
		ceilingMillis int64
	}{
		{"current", ms - 10, nil, ms + 10, "", 100},
		{"expiring now", ms - 10, nil, ms, "", 100},
		{"backwards", ms, nil, ms, wire.CodeContractInvalid, 100},
		{"opening after it ends", ms - 10, nbf(ms + 20), ms + 10, wire.CodeContractInvalid, 100},
		{"too long", ms - 10, nil, ms + 100, wire.CodeContractInvalid, 100},
		{"an early nbf lengthening it", ms - 10, nbf(ms - 200), ms + 10, wire.CodeContractInvalid, 100},
		{"issued in the future", ms + 1, nil, ms + 10, wire.CodePermissionDenied, 100},
		{"not yet open", ms - 10, nbf(ms + 5), ms + 10, wire.CodeFailedPrecondition, 100},
		{"expired", ms - 20, nil, ms - 1, wire.CodeExpired, 100},
	} {
		err := anchor.Currency("it", tc.iat, tc.nbf, tc.exp, now, time.Duration(tc.ceilingMillis)*time.Millisecond)
		if codeOf(err) != tc.code || (tc.code == "") != (err == nil) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.code)
		}
	}
}

// TestRegistry writes anchors to a records bucket on a real broker and reads them back: a key id
// registers once, a closed window stays closed, and a status record's revocation is read.
func TestRegistry(t *testing.T) {
	ctx := t.Context()
	nc, err := nats.Connect(meshtest.StartBroker(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const sp = wire.Space("anchors")
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: string(meshwire.RecordsBucket(sp)), History: 8})
	if err != nil {
		t.Fatal(err)
	}
	reg := anchor.Registry{Space: sp, Conn: nc, JS: js}
	now := time.Now()
	first, second := signer(t, now), signer(t, now)
	for _, s := range []*anchor.Signer{first, second} {
		if err := reg.Register(ctx, &s.Anchor); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Register(ctx, &first.Anchor); err == nil {
		t.Fatal("a key id registered twice")
	}
	bad := second.Anchor
	bad.KeyID, bad.Roles = "bad-key", []anchor.Role{"minting"}
	if err := reg.Register(ctx, &bad); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("an anchor of an unknown role: %v", err)
	}
	closedAt := now.Add(time.Minute)
	if err := reg.CloseWindow(ctx, first.Anchor.KeyID, closedAt); err != nil {
		t.Fatal(err)
	}
	if err := reg.CloseWindow(ctx, first.Anchor.KeyID, closedAt.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, meshwire.SignerKey(second.Anchor.KeyID, meshwire.RecordStatusLeaf), []byte(`{"revoked":true,"at":1}`)); err != nil {
		t.Fatal(err)
	}
	got, err := reg.Get(ctx, first.Anchor.KeyID)
	if err != nil || got == nil || got.ValidTo != wire.MillisOf(closedAt) || got.PublicKey != first.Anchor.PublicKey || got.Revoked {
		t.Fatalf("the closed key: %+v, %v", got, err)
	}
	if got, err := reg.Get(ctx, "no-such-key"); err != nil || got != nil {
		t.Fatalf("an unknown key: %+v, %v", got, err)
	}
	list, err := reg.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for _, a := range list {
		if a.KeyID == second.Anchor.KeyID && !a.Revoked || a.KeyID == first.Anchor.KeyID && (a.Revoked || a.ValidTo != wire.MillisOf(closedAt)) {
			t.Errorf("listed %+v", a)
		}
	}
}
