package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// The delivery daemon's records and frames (the reference's Plane 3). They are the daemon's own
// state and its hand-off to members, shared with the TypeScript daemon and agents.

// ControlRequest is a request on the ctl.delivery rail: an op, its arguments, and the caller,
// whose id must equal the request subject's sender.
type ControlRequest struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
	From EndpointRef     `json:"from"`
}

// ControlReply answers a ControlRequest: {ok, data?, error?} as the reference daemon answers it,
// and, on a refusal, a code. Error is a sentence for people.
//
// SPEC does not fix this shape: it deletes the whole ctl rail (§1, §13.11), which the reference
// still uses for the delivery control ops. Code is this implementation's addition beside Error;
// a reader that knows only {ok, data, error} ignores it, and a reply without one (the reference
// daemon's, an older build's) reads as a refusal that is not to be retried.
type ControlReply struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error string          `json:"error,omitempty"`
	// Code, beside Error, says whether the same request may succeed later: ControlCodeRetry or
	// ControlCodeRefused. Empty when OK, or from a daemon that sends no code.
	Code string `json:"code,omitempty"`
}

// The codes of ControlReply.Code. Codes cross the wire: add to the list, never rename.
const (
	// ControlCodeRetry: the daemon could not serve the request at the moment (it is starting,
	// re-checking its lease or stopping, its queue is full, or the op ran out of time); the same
	// request may succeed if sent again later.
	ControlCodeRetry = "retry"
	// ControlCodeRefused: the request failed for a reason of its own (malformed, not the
	// sender's to make, outside its read ACL, a stale generation, ...); sent again unchanged it
	// fails the same way.
	ControlCodeRefused = "refused"
)

// ControlError is a control request the delivery daemon answered with ok false. Callers branch on
// it with errors.As, and on its Code to tell a transient refusal (ControlCodeRetry) from a permanent one.
type ControlError struct {
	// Op is the control op that was asked (OpDurableJoin, OpDurableLeave, OpListMemberships).
	Op string
	// Code is the reply's code: ControlCodeRetry, ControlCodeRefused, or "" when the daemon sent
	// none.
	Code string
	// Message is the reply's error, the daemon's own words.
	Message string
}

// Error implements error.
func (e *ControlError) Error() string {
	return fmt.Sprintf("%s: the delivery daemon refused: %s", e.Op, e.Message)
}

// Err returns nil for an ok reply, else the refusal as a *ControlError of op.
func (r *ControlReply) Err(op string) error {
	if r.OK {
		return nil
	}
	return &ControlError{Op: op, Code: r.Code, Message: r.Error}
}

// The delivery control ops.
const (
	OpDurableJoin  = "durableJoin"
	OpDurableLeave = "durableLeave"
)

// DurableJoinArgs are the arguments of durableJoin. The daemon takes the caller's lifecycle from
// its one live ACL row, never from the caller.
type DurableJoinArgs struct {
	Channel string `json:"channel"`
}

// DurableJoinResult is durableJoin's data: Durable is false, with a Reason, when the backstop could
// not be established.
type DurableJoinResult struct {
	Durable    bool   `json:"durable"`
	Reason     string `json:"reason,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// DurableLeaveArgs are the arguments of durableLeave: the generation durableJoin returned guards
// against a stale leave undoing a newer join.
type DurableLeaveArgs struct {
	Channel      string       `json:"channel"`
	Generation   int64        `json:"generation"`
	LifecycleUID LifecycleUID `json:"lifecycleUid"`
}

// DurableLeaveResult is durableLeave's data.
type DurableLeaveResult struct {
	Channel     string `json:"channel"`
	AlreadyLeft bool   `json:"alreadyLeft,omitempty"`
}

// DeliveryFrameHeader marks a durable hand-off on the dlv rail; its value is the frame version.
const DeliveryFrameHeader = "Cotal-Delivery-Frame"

// DeliveryFrameVersion is the version of DeliveryFrame this implementation writes and reads.
const DeliveryFrameVersion = 1

// DeliveryFrame is the body of a durable hand-off to a member: exactly these three fields.
type DeliveryFrame struct {
	Version int           `json:"version"`
	Channel string        `json:"channel"`
	Msg     *CotalMessage `json:"msg"`
}

// DecodeDeliveryFrame decodes a dlv hand-off strictly: exactly version, channel and msg, version
// 1, a concrete channel equal to the message's, and a valid message shape. Anything else is a
// *ValidationError, and the message is terminated.
func DecodeDeliveryFrame(data []byte) (*DeliveryFrame, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, Invalid("delivery frame", "", "must be a JSON object")
	}
	if len(raw) != 3 || raw["version"] == nil || raw["channel"] == nil || raw["msg"] == nil {
		return nil, Invalid("delivery frame", "", "must have exactly version, channel and msg")
	}
	var f DeliveryFrame
	if err := json.Unmarshal(raw["version"], &f.Version); err != nil || f.Version != DeliveryFrameVersion {
		return nil, Invalidf("delivery frame version", string(raw["version"]), "must be %d", DeliveryFrameVersion)
	}
	if err := json.Unmarshal(raw["channel"], &f.Channel); err != nil {
		return nil, Invalid("delivery frame channel", "", "must be a string")
	}
	if err := ValidateChannel(f.Channel); err != nil {
		return nil, err
	}
	m, err := DecodeMessage(raw["msg"])
	if err != nil {
		return nil, Within("msg", err)
	}
	if m.Channel != f.Channel {
		return nil, Invalidf("msg.channel", m.Channel, "must equal the frame's channel %q", f.Channel)
	}
	f.Msg = m
	return &f, nil
}

// The time budgets of a durable join on the control rail: the client waits ControlJoinWait for
// the reply, and the delivery daemon serves one control request, the join's catch-up copy
// included, within ControlServeBudget. The daemon's budget is the shorter, so that its reply (a
// retry code included) reaches the client before the client gives up.
const (
	ControlJoinWait = 30 * time.Second
)
