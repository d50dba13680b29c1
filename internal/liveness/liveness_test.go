package liveness_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/liveness"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

func TestProbeVerdicts(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	ctx := t.Context()
	agentCred := m.AgentCred(t, ledger.Request{Name: "alice"})
	alice, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(agentCred.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(context.Background())

	// Nobody serves either plane yet: the broker's no-responders grades unbound.
	for _, plane := range wire.Planes {
		res, err := alice.Probe(ctx, plane)
		if err != nil || res.Outcome != wire.ProbeNoResponders || res.Verdict != wire.ResponderUnbound {
			t.Errorf("probe %s with no responder = %+v, %v", plane, res, err)
		}
	}

	verdict := wire.ResponderBound
	supervisor := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileSupervisor, Name: "manager"}))
	sub, err := liveness.Serve(supervisor.Conn, m.Space, wire.PlaneManager, func(context.Context) (wire.ResponderState, string) {
		return verdict, "inst1"
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []wire.ResponderState{wire.ResponderBound, wire.ResponderStale, wire.ResponderUnbound} {
		verdict = want
		res, err := alice.Probe(ctx, wire.PlaneManager)
		if err != nil || res.Outcome != wire.ProbeReplied || res.Verdict != want || res.Answer.Instance != "inst1" {
			t.Errorf("probe answered %s = %+v, %v", want, res, err)
		}
	}
	// The delivery plane is still unserved: the manager's responder does not answer for it.
	if res, _ := alice.Probe(ctx, wire.PlaneDelivery); res.Verdict != wire.ResponderUnbound {
		t.Errorf("delivery plane = %+v", res)
	}
	if _, err := alice.Probe(ctx, "auth"); err == nil {
		t.Error("a probe of an unknown plane must be refused before publishing")
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	// A credential without the probe rows (an observer) is refused by the broker: unknown.
	obsCred := m.Mint(t, ledger.Request{Profile: authority.ProfileObserver, Name: "watcher"})
	obs, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(obsCred.Creds), cotal.WithPresence(false))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close(context.Background())
	if res, err := obs.Probe(ctx, wire.PlaneManager); err != nil || res.Outcome != wire.ProbeRefused || res.Verdict != wire.ResponderUnknown {
		t.Errorf("an observer's probe = %+v, %v", res, err)
	}
}

// TestResponderAnswersOnlyTheBoundReply shows a probe whose reply subject is not under the
// request's .reply. leaf gets no answer: the responder will not be aimed elsewhere.
func TestResponderAnswersOnlyTheBoundReply(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t)
	supervisor := m.Connect(t, m.Mint(t, ledger.Request{Profile: authority.ProfileSupervisor, Name: "manager"}))
	answered := make(chan struct{}, 4)
	if _, err := liveness.Serve(supervisor.Conn, m.Space, wire.PlaneManager, func(context.Context) (wire.ResponderState, string) {
		answered <- struct{}{}
		return wire.ResponderBound, ""
	}, nil); err != nil {
		t.Fatal(err)
	}
	cred, c := m.Agent(t, ledger.Request{Name: "alice"})
	request := m.Space.LivenessSubject(wire.PlaneManager, cred.Principal)
	inbox := wire.ConnID(cred.PublicKey).InboxPrefix() + ".x"
	sub, err := c.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PublishMsg(&nats.Msg{Subject: request, Reply: inbox}); err != nil {
		t.Fatal(err)
	}
	// A bound probe after it is answered; by then the stray one was judged (same connection,
	// same responder, in order).
	good := wire.ReplySubject(request, "n1")
	goodSub, err := c.SubscribeSync(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PublishMsg(&nats.Msg{Subject: request, Reply: good}); err != nil {
		t.Fatal(err)
	}
	if _, err := goodSub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the bound probe was not answered: %v", err)
	}
	if n, _, _ := sub.Pending(); n != 0 || len(answered) != 1 {
		t.Errorf("the stray reply subject got %d answers; the grader ran %d times", n, len(answered))
	}
}
