package wire

import (
	"errors"
	"fmt"
)

// Reason is why a received delivery was rejected (SPEC §5). Rejections are permanent: the message
// is terminated, never redelivered. The values are the SPEC's tokens; new ones are only ever
// appended.
type Reason string

// The rejection reasons.
const (
	// ReasonMalformedSubject: the subject does not parse as a delivery, or its owner slot does not
	// hold a principal owner.
	ReasonMalformedSubject Reason = "malformed-subject"
	// ReasonSenderMismatch: from is missing, or from.id is not the subject's sender.
	ReasonSenderMismatch Reason = "sender-mismatch"
	// ReasonMalformedJSON: the payload is not valid UTF-8 JSON, or breaks the message schema.
	ReasonMalformedJSON Reason = "malformed-json"
)

// RejectError is returned by Guard for a delivery that must be terminated. Err holds the detail,
// usually a *ValidationError.
type RejectError struct {
	Reason  Reason
	Subject string
	Err     error
}

// Error implements error.
func (e *RejectError) Error() string {
	return fmt.Sprintf("reject %s: %s: %v", e.Subject, e.Reason, e.Err)
}

// Unwrap returns the detail.
func (e *RejectError) Unwrap() error { return e.Err }

// ErrRejected is matched by every *RejectError.
var ErrRejected = errors.New("delivery rejected")

// Is reports whether target is ErrRejected.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// DeliveryKind is how a message was addressed to its receiver, taken from the subject it arrived
// on and never from the payload's routing fields, which are advisory (SPEC §4).
type DeliveryKind string

// The delivery kinds.
const (
	DeliveryChannel DeliveryKind = "channel" // arrived on chat
	DeliveryDM      DeliveryKind = "dm"      // arrived on inst
	DeliveryAnycast DeliveryKind = "anycast" // arrived on svc
)

var deliveryKinds = map[SubjectKind]DeliveryKind{
	KindChat: DeliveryChannel,
	KindInst: DeliveryDM,
	KindSvc:  DeliveryAnycast,
}

// Delivery is a received message that passed Guard.
type Delivery struct {
	// Kind is how the message was addressed, from the subject.
	Kind DeliveryKind
	// Sender is the subject's sender, equal to Message.From.ID.
	Sender Principal
	// Subject is the parsed subject: for a channel delivery its Rest is the channel the message
	// was published on.
	Subject ParsedSubject
	// Message is the decoded message.
	Message *CotalMessage
}

// Guard judges a received delivery (SPEC §5, §12 items 5 and 6): the subject must parse as a
// delivery and carry a principal owner (a derived owner token or "local"), the payload must be a
// valid message, and from.id must equal the subject's sender. It returns the delivery, or a
// *RejectError whose Reason says why it must be terminated. Unknown fields are ignored.
func Guard(subject string, payload []byte) (*Delivery, error) {
	return guard(subject, payload, false)
}

// GuardOwned is Guard for a payload the caller gives away, as a receiver does with each message
// nats.go hands it (every one a copy of its own): the delivery's strings may share payload's
// memory instead of a copy of it, so the caller must never change payload afterwards.
func GuardOwned(subject string, payload []byte) (*Delivery, error) {
	return guard(subject, payload, true)
}

func guard(subject string, payload []byte, owned bool) (*Delivery, error) {
	ps, sender, rej := guardSubject(subject)
	if rej != nil {
		return nil, rej
	}
	reject := func(r Reason, err error) (*Delivery, error) {
		return nil, &RejectError{Reason: r, Subject: shorten(subject), Err: err}
	}
	env, err := decodeEnvelope(payload, owned)
	if err != nil {
		return reject(ReasonMalformedJSON, err)
	}
	switch {
	case env.From == nil:
		return reject(ReasonSenderMismatch, Invalid("from", "", "is missing"))
	case env.From.ID == nil || *env.From.ID != ps.Sender():
		return reject(ReasonSenderMismatch, Invalidf("from.id", deref(env.From.ID), "must equal the subject's sender %q", ps.Sender()))
	}
	msg, err := env.message()
	if err != nil {
		return reject(ReasonMalformedJSON, err)
	}
	return &Delivery{Kind: deliveryKinds[ps.Kind], Sender: sender, Subject: ps, Message: msg}, nil
}

// GuardDecoded is Guard for a message already decoded by DecodeMessage (a durable hand-off's,
// which carries it decoded): the subject's checks and the sender's, without encoding the message
// again to decode it a second time.
func GuardDecoded(subject string, m *CotalMessage) (*Delivery, error) {
	ps, sender, rej := guardSubject(subject)
	if rej != nil {
		return nil, rej
	}
	if m.From.ID != ps.Sender() {
		return nil, &RejectError{Reason: ReasonSenderMismatch, Subject: shorten(subject),
			Err: Invalidf("from.id", m.From.ID, "must equal the subject's sender %q", ps.Sender())}
	}
	return &Delivery{Kind: deliveryKinds[ps.Kind], Sender: sender, Subject: ps, Message: m}, nil
}

// guardSubject parses a delivery subject and its sender, which must carry a principal owner.
func guardSubject(subject string) (ParsedSubject, Principal, *RejectError) {
	reject := func(err error) (ParsedSubject, Principal, *RejectError) {
		return ParsedSubject{}, Principal{}, &RejectError{Reason: ReasonMalformedSubject, Subject: shorten(subject), Err: err}
	}
	ps, err := ParseSubject(subject)
	if err != nil {
		return reject(err)
	}
	if !isPrincipalOwner(ps.Owner) {
		return reject(Invalid("subject owner", ps.Owner, `is not a principal owner token (u_ + 26 base32-lower, or "local")`))
	}
	sender, err := ps.Principal()
	if err != nil {
		return reject(Within("subject", err))
	}
	return ps, sender, nil
}
