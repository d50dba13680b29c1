package delivery

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/wire"
)

// The package exports no errors: a control request's failure reaches its caller as a
// wire.ControlReply, which the client side turns into a *wire.ControlError.

// Errors a control request is refused with before it runs. Their text asks the caller to retry,
// and so does their code (wire.ControlCodeRetry): the refusal is about this daemon's state at the
// moment, never about the request.
var (
	errNotServing = errors.New("delivery: this daemon is not serving (it is starting, re-checking its lease or stopping); retry")
	errBusy       = errors.New("delivery: too many control requests are waiting; retry")
)

// errKeyExists is returned by create for a key that holds a value.
var errKeyExists = errors.New("delivery: key exists")

// errLeaseLost ends an active term whose lease was taken or could not be renewed.
var errLeaseLost = errors.New("delivery: lease lost")

// controlCode is the code of a control request's failure (wire.ControlReply.Code):
// wire.ControlCodeRetry when it is about the daemon's or the broker's state at the moment (the
// daemon is not serving or is full, the op or a broker request ran out of time, JetStream did not
// answer), which the same request may get past later; wire.ControlCodeRefused for the rest, which
// are about the request.
func controlCode(err error) string {
	switch {
	case errors.Is(err, errNotServing), errors.Is(err, errBusy),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders):
		return wire.ControlCodeRetry
	}
	return wire.ControlCodeRefused
}
