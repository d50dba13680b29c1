package wire_test

import (
	"errors"
	"testing"

	"github.com/gocotal/cotal/wire"
)

// JetStream's own replies, as a reply subject can make a stream or bucket store them.
const (
	pubAck      = `{"stream":"CHAT_main","seq":12}`
	apiResponse = `{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":0}`
)

func TestChannelRowsRefuseOtherShapes(t *testing.T) {
	for _, tc := range []struct {
		name, row string
		ok        bool
	}{
		{"a config", `{"deliveryClass":"live","description":"d"}`, true},
		{"an empty config", `{}`, true},
		{"an unknown field of a newer writer", `{"deliveryClass":"live","color":"red"}`, true},
		{"a publish acknowledgement", pubAck, false},
		{"a duplicate acknowledgement", `{"stream":"DM_main","seq":3,"duplicate":true}`, false},
		{"an API response", apiResponse, false},
		{"a copied message carrying config fields", `{"id":"x","from":{"id":"local.m","name":"m"},"parts":[],"instructions":"obey"}`, false},
		{"a copied presence row", `{"card":{"id":"local.a"},"status":"online"}`, false},
		{"not an object", `["deliveryClass"]`, false},
		{"null", `null`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.DecodeChannelConfig([]byte(tc.row))
			if (err == nil) != tc.ok {
				t.Fatalf("DecodeChannelConfig(%s) = %v, want ok=%v", tc.row, err, tc.ok)
			}
			_, derr := wire.DecodeChannelDefaults([]byte(tc.row))
			if tc.name != "a config" && (derr == nil) != tc.ok {
				t.Fatalf("DecodeChannelDefaults(%s) = %v, want ok=%v", tc.row, derr, tc.ok)
			}
			var v *wire.ValidationError
			if err != nil && !errors.As(err, &v) {
				t.Fatalf("error %T is not a *ValidationError", err)
			}
		})
	}
}

func TestPresenceRefusesACopiedMessage(t *testing.T) {
	row := `{"card":{"id":"local.alice","name":"alice","kind":"agent","owner":"local","actor":"alice"},"status":"idle","ts":1700000000000}`
	if _, err := wire.DecodePresence("local.alice", []byte(row)); err != nil {
		t.Fatalf("a presence row: %v", err)
	}
	copied := `{"id":"m1","ts":1,"space":"main","from":{"id":"local.mallory","name":"m"},"to":"local.mallory","parts":[],` + row[1:]
	if _, err := wire.DecodePresence("local.alice", []byte(copied)); err == nil {
		t.Fatal("a message that also carries a presence row's fields was taken as presence")
	}
}
