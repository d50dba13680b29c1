package warden

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// noticeEvery bounds the notices one sender gets: a flood of bad messages earns one a second.
const noticeEvery = time.Second

// notify tells the sender of a message the guard refused, and the warden deleted, why: a direct
// message from the warden (meshwire.QuarantineNotice), which only the sender's own credentials
// may read. A subject that names no sender (not a delivery subject) gets none, and neither does
// the warden itself.
func (w *Warden) notify(ctx context.Context, at location, subject string, body []byte, refused error) {
	ps, err := wire.ParseSubject(subject)
	if err != nil {
		return
	}
	sender, err := ps.Principal()
	if err != nil || sender == meshwire.WardenPrincipal() || !w.noticeDue(sender) {
		return
	}
	q := meshwire.Quarantined{Subject: subject, Stream: at.stream, Seq: at.seq, Reason: string(wire.ReasonMalformedJSON), Detail: refused.Error()}
	if rej, ok := errors.AsType[*wire.RejectError](refused); ok {
		q.Reason = string(rej.Reason)
		if rej.Err != nil {
			q.Detail = rej.Err.Error()
		}
	}
	var id struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &id) == nil && len(id.ID) <= 128 {
		q.ID = id.ID
	}
	m, err := meshwire.QuarantineNotice(w.cfg.Space, sender, q)
	if err == nil {
		var raw []byte
		if raw, err = wire.EncodeMessage(m, 0); err == nil {
			_, err = w.js.Publish(ctx, w.cfg.Space.DMSubject(sender, meshwire.WardenPrincipal()), raw, jetstream.WithMsgID(m.ID))
		}
	}
	if err != nil {
		w.limited("quarantine notice failed", slog.LevelWarn, "tell the sender of a quarantined message", "to", sender.String(), "subject", subject, "err", err)
		return
	}
	w.log.Info("quarantine notice sent", "to", sender.String(), "subject", subject, "reason", q.Reason)
}

// noticeDue reports whether sender may be sent a notice now, and if so records it.
func (w *Warden) noticeDue(sender wire.Principal) bool {
	now := time.Now()
	w.noticedMu.Lock()
	defer w.noticedMu.Unlock()
	if at, ok := w.noticedAt[sender]; ok && now.Sub(at) < noticeEvery {
		return false
	}
	w.noticedAt[sender] = now
	for p, at := range w.noticedAt {
		if now.Sub(at) >= noticeEvery {
			delete(w.noticedAt, p)
		}
	}
	return true
}
