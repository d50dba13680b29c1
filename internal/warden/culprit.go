package warden

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/wire"
)

// culprit is what made the broker store a body the warden refused, as far as the body shows it.
type culprit struct {
	// kind classes the cause: "publish-ack", "duplicate-ack", "api-response" or "stored".
	kind string
	// text names the cause for the log.
	text string
	// sender, when set, is the principal proven to have aimed the body: a publish
	// acknowledgement names the stream and sequence of the message whose reply subject aimed
	// it, and that message's subject names its sender, whom the broker authenticated.
	sender *wire.Principal
}

// culpritOf names what made the broker store body under subject. An API response names no
// requester; anything else was either published by its subject's sender or delivered there by a
// consumer, so only an acknowledgement proves who aimed it.
func (w *Warden) culpritOf(ctx context.Context, subject string, body []byte) culprit {
	var ack struct {
		Stream    string `json:"stream"`
		Seq       uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate"`
		Type      string `json:"type"`
	}
	if json.Unmarshal(body, &ack) == nil {
		switch {
		case ack.Duplicate:
			// A duplicate's acknowledgement names the original message, whose sender is not
			// who re-sent its id.
			return culprit{kind: "duplicate-ack", text: fmt.Sprintf("a duplicate publish to %s (its sender is not recorded)", ack.Stream)}
		case ack.Stream != "" && ack.Seq > 0:
			c := culprit{kind: "publish-ack", text: fmt.Sprintf("the reply subject of %s seq %d", ack.Stream, ack.Seq)}
			if strings.HasPrefix(ack.Stream, "$") {
				return c
			}
			at := location{stream: ack.Stream, seq: ack.Seq}
			subj, ok := w.deleted.subject(at)
			if !ok {
				src, err := kvget.ReadSeq(ctx, w.nc, ack.Stream, ack.Seq)
				if err != nil {
					return c
				}
				subj = src.Subject
			}
			if p, ok := w.senderOf(subj); ok {
				c.sender = &p
				c.text = fmt.Sprintf("%s, through the reply subject of %s seq %d", p, ack.Stream, ack.Seq)
			} else {
				c.text = fmt.Sprintf("the publisher of %s on %s seq %d", subj, ack.Stream, ack.Seq)
			}
			return c
		case strings.HasPrefix(ack.Type, "io.nats.jetstream."):
			return culprit{kind: "api-response", text: "a JetStream API response aimed by its requester's reply subject"}
		}
	}
	if p, ok := w.senderOf(subject); ok {
		return culprit{kind: "stored", text: fmt.Sprintf("%s, or a consumer delivery onto its subject", p)}
	}
	return culprit{kind: "stored", text: "unknown"}
}

// senderOf returns the principal a subject of the space names as its only possible publisher: a
// message's sender tokens, or the owner of a presence key (a principal writes only its own).
func (w *Warden) senderOf(subject string) (wire.Principal, bool) {
	if ps, err := wire.ParseSubject(subject); err == nil {
		p, err := wire.ParsePrincipal(ps.Sender())
		return p, err == nil
	}
	if key, ok := strings.CutPrefix(subject, w.cfg.Space.PresenceBucket().Subject("")); ok {
		p, err := wire.ParsePrincipal(key)
		return p, err == nil
	}
	return wire.Principal{}, false
}

// revokeWindow is how long the warden remembers revoking a principal, so that a flood of captures
// from one credential revokes it once.
const revokeWindow = time.Minute

// punish revokes, for reason, the credentials of the principal proven to have caused c, once per
// revokeWindow. Without Config.RevokeSender it only logs.
func (w *Warden) punish(ctx context.Context, c culprit, reason string) {
	if c.sender == nil || w.cfg.RevokeSender == nil {
		return
	}
	p := *c.sender
	now := time.Now()
	w.revokedMu.Lock()
	if at, ok := w.revokedAt[p]; ok && now.Sub(at) < revokeWindow {
		w.revokedMu.Unlock()
		return
	}
	w.revokedAt[p] = now
	for q, at := range w.revokedAt {
		if now.Sub(at) >= revokeWindow {
			delete(w.revokedAt, q)
		}
	}
	w.revokedMu.Unlock()
	n, err := w.cfg.RevokeSender(ctx, p, reason)
	if err != nil {
		w.log.Error("revoke an offender", "principal", p.String(), "reason", reason, "revoked", n, "err", err)
		return
	}
	w.log.Warn("offender revoked", "principal", p.String(), "reason", reason, "credentials", n)
}

// deletedSubjects remembers the subjects of the last messages the warden deleted, so that an
// acknowledgement naming one still names its sender: an agent must not escape revocation by making
// the message whose reply subject it aimed one the warden quarantines first. It is safe for
// concurrent use.
type deletedSubjects struct {
	mu    sync.Mutex
	at    map[location]string // guarded by mu
	order []location          // guarded by mu: oldest first
}

// rememberDeleted is how many deleted messages' subjects are kept.
const rememberDeleted = 4096

func (d *deletedSubjects) add(at location, subject string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[location]string{}
	}
	if _, ok := d.at[at]; ok {
		return
	}
	d.at[at] = subject
	d.order = append(d.order, at)
	if len(d.order) > rememberDeleted {
		delete(d.at, d.order[0])
		d.order = d.order[1:]
	}
}

func (d *deletedSubjects) subject(at location) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.at[at]
	return s, ok
}
