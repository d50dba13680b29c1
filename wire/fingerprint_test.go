package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFingerprint pins the fingerprint object: absent members omitted, args canonical, the caller
// from the subject, and every effect-defining member changing the digest.
func TestFingerprint(t *testing.T) {
	caller := testCaller(t)
	route := EndpointRoute{Address: AddressOne, Endpoint: "manager", Command: "spawn", Caller: caller, Nonce: NewNonce()}
	req := &EndpointRequest{V: 1, ID: "r1", Class: ClassEphemeral, ReplyExpected: true,
		Op:   EndpointOp{Endpoint: "manager", Command: "spawn", InputDigest: "sha256:" + strings.Repeat("a", 64), OutputDigest: "sha256:" + strings.Repeat("b", 64)},
		Args: json.RawMessage(`{"name":"carol"}`), From: EndpointRef{ID: "local.alice", Name: "alice"}}
	want := `{"args":{"name":"carol"},"caller":{"id":"local.alice","lifecycleUid":"` + string(testUID) + `"},"class":"ephemeral","command":"spawn","endpoint":"manager","id":"r1","inputDigest":"sha256:` + strings.Repeat("a", 64) + `","outputDigest":"sha256:` + strings.Repeat("b", 64) + `"}`
	wantDigest, _ := Digest([]byte(want))
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
	for name, edit := range map[string]func(r *EndpointRoute, q *EndpointRequest){
		"args":   func(_ *EndpointRoute, q *EndpointRequest) { q.Args = json.RawMessage(`{"name":"dave"}`) },
		"id":     func(_ *EndpointRoute, q *EndpointRequest) { q.ID = "r2" },
		"caller": func(r *EndpointRoute, _ *EndpointRequest) { r.Caller.UID = testUID2 },
		"goal":   func(_ *EndpointRoute, q *EndpointRequest) { q.GoalID = "g" },
		"target": func(r *EndpointRoute, q *EndpointRequest) {
			r.Mode = ModeOwner
			q.Target = &Target{Owner: "local", Actor: "bob", LifecycleUID: string(testUID2)}
		},
	} {
		r, q := route, *req
		edit(&r, &q)
		if other, _ := Fingerprint(r, &q); other == got {
			t.Errorf("changing %s kept the fingerprint", name)
		}
	}
}
