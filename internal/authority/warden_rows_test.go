package authority_test

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// TestWardenReachesNoOtherSpace: the warden's stream verbs name no stream, so its reach is its
// space account's JetStream, which is its own store's. On a broker serving two spaces, a warden
// of one finds no stream of the other: it neither reads nor deletes a stored row there, nor
// creates a consumer on it, and the row survives. In its own space the broker refuses its
// message deletes on the records, contract and admission stores, and lets it delete elsewhere.
func TestWardenReachesNoOtherSpace(t *testing.T) {
	m := meshtest.Start(t, meshtest.WithSpaces("main", "other"))
	other := &meshtest.Mesh{Mesh: m.Mesh, Dir: m.Dir, Space: "other"}
	warden := func(mm *meshtest.Mesh) *meshtest.Client {
		return mm.Connect(t, mm.Mint(t, ledger.Request{Profile: authority.ProfileWarden, Name: "inspector"}))
	}
	mine, theirs := warden(m), warden(other)

	ctx := t.Context()
	presence := wire.Space("other").PresenceBucket()
	kv, err := theirs.JS.KeyValue(ctx, string(presence))
	if err != nil {
		t.Fatal(err)
	}
	seq, err := kv.Put(ctx, "row", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	st := presence.Stream()
	if _, err := mine.JS.Stream(ctx, st); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("main's warden read stream %s of space other: %v", st, err)
	}
	if _, err := mine.JS.CreateConsumer(ctx, st, jetstream.ConsumerConfig{Name: "peek"}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("main's warden made a consumer on %s: %v", st, err)
	}
	get := []byte(`{"seq":` + strconv.FormatUint(seq, 10) + `}`)
	for _, verb := range []string{jsapi.MsgGet, jsapi.MsgDelete} {
		msg, err := mine.Request(verb+st, get, 10*time.Second)
		if err != nil {
			t.Errorf("main's warden %s%s: %v, want stream not found", verb, st, err)
		} else if !strings.Contains(string(msg.Data), `"code":404`) {
			t.Errorf("main's warden %s%s: %s, want stream not found", verb, st, msg.Data)
		}
	}
	kept := base64.StdEncoding.EncodeToString([]byte("kept"))
	if msg, err := theirs.Request(jsapi.MsgGet+st, get, 10*time.Second); err != nil || !strings.Contains(string(msg.Data), kept) {
		t.Errorf("space other's row after main's warden: %v", err)
	}

	for _, st := range []string{meshwire.RecordsBucket("main").Stream(), meshwire.ContractStream("main"), meshwire.AdmissionBucket("main").Stream()} {
		if err := mine.Publish(jsapi.MsgDelete+st, []byte(`{"seq":1}`)); err != nil {
			t.Fatal(err)
		}
		if refused, err := mine.Refused("Publish", jsapi.MsgDelete+st); err != nil || !refused {
			t.Errorf("the broker let the warden delete a message of %s (refused %v, %v)", st, refused, err)
		}
	}
	ownChat := wire.Space("main").ChatStream()
	if err := mine.Publish(jsapi.MsgDelete+ownChat, []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	if refused, err := mine.Refused("Publish", jsapi.MsgDelete+ownChat); err != nil || refused {
		t.Errorf("the broker refused the warden's message delete on %s (%v)", ownChat, err)
	}
}
