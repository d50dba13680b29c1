package jsapi

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// WrongLastSequence reports whether a JetStream error code is a compare-and-set that found another
// last sequence: the plain code on a stream of one replica, or its constant form, which a
// replicated stream (a cluster's) answers when a concurrent write to the subject is in flight.
func WrongLastSequence(code int) bool {
	return code == int(jetstream.JSErrCodeStreamWrongLastSequence) || code == int(jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Conflict reports whether err is a JetStream API error of a compare-and-set that lost
// (WrongLastSequence).
func Conflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && WrongLastSequence(int(apiErr.ErrorCode))
}
