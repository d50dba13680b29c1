package meshwire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gocotal/cotal/wire"
)

// TestFingerprint pins the fingerprint object: absent members omitted, args canonical, the caller
// from the subject, and every effect-defining member changing the digest.
func TestFingerprint(t *testing.T) {
	caller := testCaller(t)
	route := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: "manager", Command: "spawn", Caller: caller, Nonce: wire.NewNonce()}
	req := &wire.EndpointRequest{V: 1, ID: "r1", Class: wire.ClassEphemeral, ReplyExpected: true,
		Op:   wire.EndpointOp{Endpoint: "manager", Command: "spawn", InputDigest: "sha256:" + strings.Repeat("a", 64), OutputDigest: "sha256:" + strings.Repeat("b", 64)},
		Args: json.RawMessage(`{"name":"carol"}`), From: wire.EndpointRef{ID: "local.alice", Name: "alice"}}
	want := `{"args":{"name":"carol"},"caller":{"id":"local.alice","lifecycleUid":"` + string(testUID) + `"},"class":"ephemeral","command":"spawn","endpoint":"manager","id":"r1","inputDigest":"sha256:` + strings.Repeat("a", 64) + `","outputDigest":"sha256:` + strings.Repeat("b", 64) + `"}`
	wantDigest, _ := wire.Digest([]byte(want))
	got, err := Fingerprint(route, req)
	if err != nil || got != wantDigest {
		t.Fatalf("Fingerprint = %s, %v; want the digest of %s", got, err, want)
	}
	// The same request with its args spelled otherwise fingerprints the same.
	spaced := *req
	spaced.Args = json.RawMessage(`{ "name" : "carol" }`)
	if again, _ := Fingerprint(route, &spaced); again != got {
		t.Error("the args' spelling changed the fingerprint")
	}
	for name, edit := range map[string]func(r *wire.EndpointRoute, q *wire.EndpointRequest){
		"args":   func(_ *wire.EndpointRoute, q *wire.EndpointRequest) { q.Args = json.RawMessage(`{"name":"dave"}`) },
		"id":     func(_ *wire.EndpointRoute, q *wire.EndpointRequest) { q.ID = "r2" },
		"caller": func(r *wire.EndpointRoute, _ *wire.EndpointRequest) { r.Caller.UID = testUID2 },
		"goal":   func(_ *wire.EndpointRoute, q *wire.EndpointRequest) { q.GoalID = "g" },
		"target": func(r *wire.EndpointRoute, q *wire.EndpointRequest) {
			r.Mode = wire.ModeOwner
			q.Target = &wire.Target{Owner: "local", Actor: "bob", LifecycleUID: string(testUID2)}
		},
	} {
		r, q := route, *req
		edit(&r, &q)
		if other, _ := Fingerprint(r, &q); other == got {
			t.Errorf("changing %s kept the fingerprint", name)
		}
	}
}

// TestFingerprintAuthDigest: authDigest is over the auth slot's UTF-8 bytes as carried, and absent
// auth leaves the member out.
func TestFingerprintAuthDigest(t *testing.T) {
	caller := testCaller(t)
	route := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: "manager", Command: "ps", Caller: caller, Nonce: wire.NewNonce()}
	auth := "tok-é"
	req := &wire.EndpointRequest{V: 1, ID: "r1", Op: wire.EndpointOp{Endpoint: "manager", Command: "ps"}, Auth: &auth}
	sum := sha256.Sum256([]byte(auth))
	want := `{"authDigest":"sha256:` + hex.EncodeToString(sum[:]) + `","caller":{"id":"local.alice","lifecycleUid":"` + string(testUID) + `"},"command":"ps","endpoint":"manager","id":"r1"}`
	wantDigest, _ := wire.Digest([]byte(want))
	if got, err := Fingerprint(route, req); err != nil || got != wantDigest {
		t.Errorf("Fingerprint with auth = %s, %v; want the digest of %s", got, err, want)
	}
	req.Auth = nil
	noAuth, _ := wire.Digest([]byte(strings.Replace(want, want[1:strings.Index(want, `"caller"`)], "", 1)))
	if got, _ := Fingerprint(route, req); got != noAuth {
		t.Error("absent auth did not leave authDigest out")
	}
}
