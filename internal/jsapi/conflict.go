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

// MsgGone reports whether err is a JetStream API error of a message delete or get that found no
// message at the sequence: it was never stored, or is deleted already (a file stream's store
// answers that with ErrCodeMsgDeleteFailed and a description, a memory stream's with
// ErrCodeSequenceNotFound).
func MsgGone(err error) bool {
	var e *jetstream.APIError
	if !errors.As(err, &e) {
		return false
	}
	switch int(e.ErrorCode) {
	case ErrCodeNoMessage, ErrCodeSequenceNotFound:
		return true
	case ErrCodeMsgDeleteFailed:
		return e.Description == StoreNoMessage || e.Description == StoreEOF
	}
	return false
}
