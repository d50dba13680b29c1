package mcptools

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/wire"
)

// A turn a workflow run asks of the agent reaches it as a direct message in its inbox, from the
// run, once its manager tells this server of it (manager.HookTurn): it then wakes the agent
// through whatever push the harness has, as a DM does, and tells the model to end the turn with
// cotal_yield. The manager keeps the turn; the message only says it is there.

// turnMessageID names the message of the turn goalID: a turn told twice is one message.
func (t *Tools) turnMessageID(goalID string) string { return "turn-" + goalID + "-" + t.turnTag }

// isTurn reports whether d is a turn message this server put in the inbox.
func (t *Tools) isTurn(d *cotal.Delivery) bool {
	id := d.Message.ID
	return d.Kind == wire.DeliveryDM && strings.HasPrefix(id, "turn-") && strings.HasSuffix(id, "-"+t.turnTag)
}

// turnDelivery is the direct message that tells the agent of the turn pt, and the conclave
// channels the turn finds it in.
func (t *Tools) turnDelivery(pt manager.PendingTurn) (*cotal.Delivery, []string, error) {
	me, space := t.c.Principal(), t.c.Space()
	var p runhost.TurnPayload
	if json.Unmarshal([]byte(pt.Payload), &p) != nil || p.Run == "" {
		// Not a workflow run's: the turn the manager's turn command was asked for, its payload
		// the asker's words, handed on as they are.
		text := fmt.Sprintf("A turn is asked of you, by %s: %s. Do it, then call cotal_yield: status done, blocked (with a note) or handoff (to another agent).",
			time.UnixMilli(pt.DeadlineAt).UTC().Format(time.RFC3339), pt.Payload)
		msg := &wire.CotalMessage{ID: t.turnMessageID(pt.GoalID), TS: wire.EpochMillis(pt.AcceptedAt), Space: string(space),
			From: wire.EndpointRef{ID: me.String(), Name: "your manager"}, To: me.String(), Parts: []wire.Part{wire.TextPart(termsafe.Sanitize(text))}}
		return &cotal.Delivery{Kind: wire.DeliveryDM, Sender: me, Message: msg}, nil, nil
	}
	run, err := meshwire.RunCaller(me.Owner(), p.Run)
	if err != nil {
		return nil, nil, fmt.Errorf("the turn's run: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Workflow run %s asks you for a turn: step %s, by %s. ", p.Run, p.Step, time.UnixMilli(pt.DeadlineAt).UTC().Format(time.RFC3339))
	for _, n := range p.Notices {
		fmt.Fprintf(&b, "Before it, the run decided at %s: %s. ", n.Step, n.Fact)
	}
	if len(p.Conclaves) > 0 {
		fmt.Fprintf(&b, "You are in the run's conclave on %s: you joined it, and speak there with cotal_send. ", strings.Join(p.Conclaves, ", "))
	}
	if p.Ask != nil {
		fmt.Fprintf(&b, "It asks you for a value: a record with these fields and kinds, %s (attempt %d of %d). ", p.Ask.Schema, p.Ask.Attempt, p.Ask.Attempts)
		b.WriteString("Do the work, then call cotal_yield with status done and that record as value.")
	} else {
		b.WriteString("Do the work it needs, then call cotal_yield: status done, blocked (with a note on what blocks you) or handoff (to another agent).")
	}
	msg := &wire.CotalMessage{ID: t.turnMessageID(pt.GoalID), TS: wire.EpochMillis(pt.AcceptedAt), Space: string(space),
		From: wire.EndpointRef{ID: run.Principal.String(), Name: "workflow run " + p.Run}, To: me.String(),
		Parts: []wire.Part{wire.TextPart(termsafe.Sanitize(b.String()))}}
	return &cotal.Delivery{Kind: wire.DeliveryDM, Sender: run.Principal, Message: msg}, p.Conclaves, nil
}
