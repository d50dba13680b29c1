package cotal

import (
	"fmt"

	"github.com/gocotal/cotal/internal/meshwire"
)

// QuarantineError reports a message this client sent that the broker stored and the mesh then
// deleted, because the receive guard refuses it: nobody receives it. The mesh's warden tells the
// sender in a direct message, which the client reports on Errors (and hands to the handler as the
// DM it is).
type QuarantineError struct {
	// ID is the deleted message's id, when it had one.
	ID string
	// Subject, Stream and Seq are where the broker stored it.
	Subject string
	Stream  string
	Seq     uint64
	// Reason is the guard's reason (a wire.Reason token); Detail says what was wrong.
	Reason string
	Detail string
}

// Error implements error.
func (e *QuarantineError) Error() string {
	return fmt.Sprintf("the mesh deleted message %q on %s (%s seq %d): %s: %s", e.ID, e.Subject, e.Stream, e.Seq, e.Reason, e.Detail)
}

// quarantineOf returns the QuarantineError a delivery reports, when it is a warden's notice.
func quarantineOf(d *Delivery) (*QuarantineError, bool) {
	q, ok := meshwire.ParseQuarantineNotice(d.Sender, d.Message)
	if !ok {
		return nil, false
	}
	return &QuarantineError{ID: q.ID, Subject: q.Subject, Stream: q.Stream, Seq: q.Seq, Reason: q.Reason, Detail: q.Detail}, true
}
