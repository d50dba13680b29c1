package meshwire

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gocotal/cotal/wire"
)

// WardenActor is the actor of a space's warden, whose principal local.cotal_warden signs the
// notices it sends.
const WardenActor = "cotal_warden"

// WardenPrincipal returns local.cotal_warden.
func WardenPrincipal() wire.Principal {
	p, err := wire.NewPrincipal(wire.DevOwner, WardenActor)
	if err != nil {
		panic("meshwire: the warden's principal: " + err.Error()) // both tokens are constants
	}
	return p
}

// Quarantined is what the warden tells the sender of a stored message it deleted: which message,
// where, and the guard's reason (wire.Reason) with its detail.
type Quarantined struct {
	ID      string `json:"id,omitempty"`
	Subject string `json:"subject"`
	Stream  string `json:"stream"`
	Seq     uint64 `json:"seq"`
	Reason  string `json:"reason"`
	Detail  string `json:"detail"`
}

// quarantineNotice is the data part of a notice.
type quarantineNotice struct {
	Quarantined *Quarantined `json:"quarantined"`
}

// QuarantineNotice returns the notice of q to the sender to, a direct message from the warden in
// space sp: a sentence for people and q as data, the part ParseQuarantineNotice reads.
func QuarantineNotice(sp wire.Space, to wire.Principal, q Quarantined) (*wire.CotalMessage, error) {
	data, err := wire.DataPart(quarantineNotice{Quarantined: &q})
	if err != nil {
		return nil, err
	}
	what := "your message"
	if q.ID != "" {
		what += " " + q.ID
	}
	text := fmt.Sprintf("The mesh deleted %s on %s after the broker stored it: %s (%s). Nobody receives it.", what, q.Subject, q.Reason, q.Detail)
	return &wire.CotalMessage{
		ID: wire.NewMessageID(), TS: wire.MillisOf(time.Now()), Space: string(sp),
		From: wire.EndpointRef{ID: WardenPrincipal().String(), Name: "cotal warden"}, To: to.String(),
		Parts: []wire.Part{wire.TextPart(text), data},
	}, nil
}

// ParseQuarantineNotice returns the quarantine a message from sender reports, when sender is the
// warden and the message carries the notice's data part.
func ParseQuarantineNotice(sender wire.Principal, m *wire.CotalMessage) (*Quarantined, bool) {
	if sender != WardenPrincipal() {
		return nil, false
	}
	for _, p := range m.Parts {
		if p.Kind != wire.PartData {
			continue
		}
		var n quarantineNotice
		if json.Unmarshal(p.Data, &n) == nil && n.Quarantined != nil && n.Quarantined.Subject != "" {
			return n.Quarantined, true
		}
	}
	return nil, false
}
