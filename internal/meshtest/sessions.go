package meshtest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/internal/sessionrail"
	"github.com/gocotal/cotal/wire"
)

// CallerRail opens the caller's rail of the session g grants on nc, its credit re-sent every
// idleCredit while quiet, and returns it with the terminal frames that arrive on it, decoded; a
// malformed one fails the test. The rail is closed at cleanup.
func CallerRail(t testing.TB, nc *nats.Conn, g *sessiongrant.Grant, idleCredit time.Duration) (*sessionrail.Rail, <-chan *meshwire.AttachFrame) {
	t.Helper()
	frames := make(chan *meshwire.AttachFrame, 1024)
	rail, err := sessionrail.Open(nc, sessionrail.Config{Space: wire.Space(g.Space), Endpoint: g.Endpoint, SessionID: g.SessionID,
		Epoch: g.Serving.Epoch, Window: g.Window, Role: sessionrail.Caller, IdleCredit: idleCredit}, sessionrail.Handlers{
		Data: func(data json.RawMessage, _ int64) error {
			f, err := meshwire.DecodeAttachFrame(data)
			if err != nil {
				t.Errorf("the serving side sent a malformed frame %s: %v", data, err)
				return err
			}
			frames <- f
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rail.Close(); rail.Wait() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return rail, frames
}
