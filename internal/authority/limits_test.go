package authority_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
)

// TestAgentCredentialLimits: the broker holds an agent to MaxSubscriptions and MaxPayload from its
// JWT: the subscription past the limit is refused and so is a publish over the payload bound, while
// the connection goes on working within them.
func TestAgentCredentialLimits(t *testing.T) {
	m := meshtest.Start(t)
	_, c := m.Agent(t, ledger.Request{Name: "greedy", Subscribe: []string{"general"}})
	inbox := c.NewRespInbox()
	for i := range authority.MaxSubscriptions + 10 {
		if _, err := c.SubscribeSync(fmt.Sprintf("%s.%d", inbox, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	meshtest.Eventually(t, 10*time.Second, "the broker refusing subscriptions past the limit", func() bool {
		for _, err := range c.Errors() {
			if errors.Is(err, nats.ErrMaxSubscriptionsExceeded) || bytes.Contains([]byte(err.Error()), []byte("maximum subscriptions exceeded")) {
				return true
			}
		}
		return false
	})
	if c.IsClosed() {
		t.Fatal("the connection was closed rather than refused the extra subscriptions")
	}
	// A publish over the payload bound: the client knows the bound from the server's INFO.
	if got := c.MaxPayload(); got > authority.MaxPayload {
		t.Errorf("the connection may publish %d bytes, over the credential's %d", got, authority.MaxPayload)
	}
	if err := c.Publish(inbox, make([]byte, authority.MaxPayload+1)); !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("a publish over the bound: %v", err)
	}
}
