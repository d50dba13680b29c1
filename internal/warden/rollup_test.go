package warden_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// TestPresenceRollupIsUndone: an agent may write only its own presence key, but a write carrying
// Nats-Rollup: all purges every other row of the bucket. The warden revokes the sender and puts
// back every row it wiped, so the roster lists every live agent again at once; repeated by one
// fresh attacker after another, it is undone each time.
func TestPresenceRollupIsUndone(t *testing.T) {
	cm := startConsumerMesh(t)
	sp := cm.Space
	bucket := sp.PresenceBucket()
	row := func(p wire.Principal) []byte {
		b, err := json.Marshal(wire.Presence{
			Card:   wire.AgentCard{ID: p.String(), Name: p.Actor(), Kind: wire.EndpointKind("agent"), Owner: p.Owner(), Actor: p.Actor()},
			Status: wire.PresenceStatus("idle"), TS: wire.MillisOf(time.Now()),
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Two agents write their rows once (no heartbeat puts them back within the test's bound).
	var live []wire.Principal
	for _, name := range []string{"alice", "bob"} {
		cred, c := cm.Agent(t, ledger.Request{Name: name})
		if _, err := mustJS(t, c.Conn).Publish(t.Context(), bucket.Subject(wire.PresenceKey(cred.Principal)), row(cred.Principal)); err != nil {
			t.Fatalf("%s's presence row: %v", name, err)
		}
		live = append(live, cred.Principal)
	}
	listed := func() (bool, string) {
		for _, p := range live {
			m, err := kvget.ReadLast(t.Context(), cm.nc, bucket.Stream(), bucket.Subject(wire.PresenceKey(p)))
			if errors.Is(err, kvget.ErrNotFound) || (err == nil && len(m.Data) == 0) {
				return false, p.String() + " is not listed"
			}
			if err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	}
	for i := range 3 {
		cred, mal := cm.Agent(t, ledger.Request{Name: fmt.Sprintf("roller%d", i)})
		msg := nats.NewMsg(bucket.Subject(wire.PresenceKey(cred.Principal)))
		msg.Data = row(cred.Principal)
		msg.Header.Set(jsapi.Rollup, jsapi.RollupAll)
		if _, err := mustJS(t, mal.Conn).PublishMsg(t.Context(), msg); err != nil {
			t.Fatalf("the rollup was refused before the warden saw it: %v", err)
		}
		start := time.Now()
		until(t, "the roster lists every live agent after rollup "+fmt.Sprint(i), listed)
		if took := time.Since(start); took > wire.HeartbeatInterval {
			t.Errorf("the wiped rows took %v to come back: no faster than a heartbeat", took)
		}
		cm.waitRevoked(t, cred, "rolled up the whole of")
	}
}
