package meshwire_test

import (
	"testing"

	"github.com/gocotal/cotal/internal/meshwire"
)

// JetStream's own replies, as a reply subject can make a bucket store them.
const (
	pubAck      = `{"stream":"CHAT_main","seq":12}`
	apiResponse = `{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":0}`
)

func TestMeshRowsAreStrict(t *testing.T) {
	acl := `{"allowSubscribe":["general"],"issuedAllowSubscribe":["general","team.*"],"revision":2,"updatedAt":5}`
	if _, err := meshwire.DecodeACLRow([]byte(acl)); err != nil {
		t.Fatalf("acl row: %v", err)
	}
	member := `{"channel":"general","owner":"local.bob","lifecycleUid":"abc123","state":"durable-active","joinCursor":4,"generation":1,"activated":true,"writerIdentity":"local.cotal_delivery","updatedAt":9}`
	if _, err := meshwire.DecodeMemberRow("general/local.bob.abc123", []byte(member)); err != nil {
		t.Fatalf("member row: %v", err)
	}
	lease := `{"holder":"local.cotal_delivery","incarnation":"i1","since":3,"ready":true}`
	if _, err := meshwire.DecodeDeliveryLease([]byte(lease)); err != nil {
		t.Fatalf("lease row: %v", err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"acl: a publish acknowledgement", err2(meshwire.DecodeACLRow([]byte(pubAck)))},
		{"acl: an extra field", err2(meshwire.DecodeACLRow([]byte(`{"allowSubscribe":[">"],"issuedAllowSubscribe":[">"],"revision":1,"updatedAt":1,"id":"x"}`)))},
		{"acl: a bad pattern", err2(meshwire.DecodeACLRow([]byte(`{"allowSubscribe":["a..b"],"issuedAllowSubscribe":[],"revision":1,"updatedAt":1}`)))},
		{"acl: trailing data", err2(meshwire.DecodeACLRow([]byte(acl + `{}`)))},
		{"member: another key", err2(meshwire.DecodeMemberRow("secret/local.bob.abc123", []byte(member)))},
		{"member: an API response", err2(meshwire.DecodeMemberRow("general/local.bob.abc123", []byte(apiResponse)))},
		{"lease: a publish acknowledgement", err2(meshwire.DecodeDeliveryLease([]byte(pubAck)))},
		{"lease: no holder", err2(meshwire.DecodeDeliveryLease([]byte(`{"holder":"","incarnation":"i","since":1,"ready":true}`)))},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func err2[T any](_ T, err error) error { return err }
