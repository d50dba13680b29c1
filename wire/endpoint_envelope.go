package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// The endpoint envelope of SPEC §13.3: the request, reply and event payloads of the endpoint
// plane. Decoding is strict where a peer's reading could otherwise differ from ours: the body must
// be I-JSON (the one canonicalizer of §13.7 judges it), member names match exactly (encoding/json
// would let "ID" fill id), and a present optional member must hold a value its absence could not
// be confused with. Unknown members are ignored, as §5 and §11 ask of every receiver; that is
// also how a responder without the bind fence ignores bind (§13.2).

// EndpointEnvelopeVersion is the only envelope version, the v of every request, reply and event.
// It is independent of the wire protocolVersion.
const EndpointEnvelopeVersion = 1

// RequestClass is a request's declared delivery contract.
type RequestClass string

// The request classes. record is a state contract, never a request class.
const (
	ClassEphemeral RequestClass = "ephemeral"
	ClassJournal   RequestClass = "journal"
)

// EndpointOp names what a request invokes. The digests pin the input and output contract; they
// are required on every command but describe, as a responder checks.
type EndpointOp struct {
	Endpoint     string `json:"endpoint"`
	Command      string `json:"command"`
	InputDigest  string `json:"inputDigest,omitempty"`
	OutputDigest string `json:"outputDigest,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler with exact member names, returning a
// *ValidationError for a missing or mistyped member.
func (o *EndpointOp) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "")
	if err != nil {
		return err
	}
	var out EndpointOp
	if err := firstErr(
		f.str("endpoint", &out.Endpoint, memberRequired),
		f.str("command", &out.Command, memberRequired),
		f.str("inputDigest", &out.InputDigest, memberNonEmpty),
		f.str("outputDigest", &out.OutputDigest, memberNonEmpty),
	); err != nil {
		return err
	}
	*o = out
	return nil
}

func (o *EndpointOp) validate() error {
	if _, err := ParseEndpointName(o.Endpoint); err != nil {
		return err
	}
	if err := ValidateCommand(o.Command); err != nil {
		return err
	}
	switch {
	case o.InputDigest != "" && !IsDigest(o.InputDigest):
		return Invalid("inputDigest", o.InputDigest, "must be sha256:<64 lower-case hex digits>")
	case o.OutputDigest != "" && !IsDigest(o.OutputDigest):
		return Invalid("outputDigest", o.OutputDigest, "must be sha256:<64 lower-case hex digits>")
	}
	return nil
}

// Target is a request's body target: the lifecycle a targeted request acts on, which the
// responder compares with the subject's target tokens (EndpointTarget) and the current mapping.
// MappingRevision, when not zero, pins the mapping revision the caller observed; revisions start
// at 1, so zero means absent.
type Target struct {
	Owner           string `json:"owner"`
	Actor           string `json:"actor"`
	LifecycleUID    string `json:"lifecycleUid"`
	MappingRevision uint64 `json:"mappingRevision,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler with exact member names, returning a
// *ValidationError for a missing or mistyped member or a mappingRevision below 1.
func (t *Target) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "")
	if err != nil {
		return err
	}
	var out Target
	var rev int64
	if err := firstErr(
		f.str("owner", &out.Owner, memberRequired),
		f.str("actor", &out.Actor, memberRequired),
		f.str("lifecycleUid", &out.LifecycleUID, memberRequired),
		f.integer("mappingRevision", &rev, memberOptional, 1),
	); err != nil {
		return err
	}
	out.MappingRevision = uint64(rev)
	*t = out
	return nil
}

func (t *Target) validate() error {
	if err := firstErr(validateEndpointIdentity("owner", t.Owner), validateEndpointIdentity("actor", t.Actor)); err != nil {
		return err
	}
	if t.MappingRevision >= maxExactInteger {
		return Invalid("mappingRevision", strconv.FormatUint(t.MappingRevision, 10), "must be at most 2^53-1")
	}
	_, err := ParseLifecycleUID(t.LifecycleUID)
	return err
}

// Bind is the incarnation a caller's describe resolved: a responder whose own instance id and
// epoch differ must refuse before any effect (SPEC §13.2 bound-incarnation fence).
type Bind struct {
	InstanceID string `json:"instanceId"`
	Epoch      int64  `json:"epoch"`
}

// UnmarshalJSON implements json.Unmarshaler with exact member names, returning a
// *ValidationError for a missing or mistyped member.
func (b *Bind) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "")
	if err != nil {
		return err
	}
	var out Bind
	if err := firstErr(
		f.str("instanceId", &out.InstanceID, memberRequired),
		f.integer("epoch", &out.Epoch, memberRequired, 0),
	); err != nil {
		return err
	}
	*b = out
	return nil
}

func (b *Bind) validate() error {
	if _, err := ParseLifecycleUID(b.InstanceID); err != nil {
		return asField(err, "instanceId")
	}
	if b.Epoch < 0 || b.Epoch >= maxExactInteger {
		return Invalid("epoch", strconv.FormatInt(b.Epoch, 10), "must be an integer from 0 to 2^53-1")
	}
	return nil
}

// Correlation carries W3C Trace Context, propagated to downstream calls, events, facts and
// receipts. Its values are not checked: Trace Context says a malformed header restarts the trace
// rather than failing the request.
type Correlation struct {
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
	Baggage     string `json:"baggage,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler with exact member names, returning a
// *ValidationError for a member that is not a string.
func (c *Correlation) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "")
	if err != nil {
		return err
	}
	var out Correlation
	if err := firstErr(
		f.str("traceparent", &out.Traceparent, memberOptional),
		f.str("tracestate", &out.Tracestate, memberOptional),
		f.str("baggage", &out.Baggage, memberOptional),
	); err != nil {
		return err
	}
	*c = out
	return nil
}

// EndpointRequest is a request on the endpoint plane, and a journaled submission (SPEC §13.3).
// Optional members are omitted when absent, never written null: DeadlineMs is absent when zero
// (a present deadline is at least 1), Auth when nil (an empty auth is still present and digested).
// Checks that need the subject or the command's contract (op-mismatch, class-mismatch,
// target-mismatch, sender-mismatch, the bind fence) are the responder's.
type EndpointRequest struct {
	V             int             `json:"v"`
	ID            string          `json:"id"`
	Op            EndpointOp      `json:"op"`
	Class         RequestClass    `json:"class"`
	ReplyExpected bool            `json:"replyExpected"`
	GoalID        string          `json:"goalId,omitempty"`
	Target        *Target         `json:"target,omitempty"`
	Bind          *Bind           `json:"bind,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	From          EndpointRef     `json:"from"`
	DeadlineMs    int64           `json:"deadlineMs,omitempty"`
	Correlation   *Correlation    `json:"correlation,omitempty"`
	Auth          *string         `json:"auth,omitempty"`
}

// DecodeEndpointRequest decodes and validates a request body. A body that is not I-JSON
// (duplicate names, a lone surrogate, a number out of range, invalid UTF-8, trailing data) or
// breaks the envelope's shape is refused with bad-request; a v other than 1 with
// unsupported-version, whatever the rest of the body holds. The error is always an
// *EndpointError with outcome not-executed, ready to reply with. Args are kept in their RFC 8785
// canonical form.
func DecodeEndpointRequest(data []byte) (*EndpointRequest, error) {
	f, err := versionedFields(data, "request", OutcomeNotExecuted)
	if err != nil {
		return nil, err
	}
	var r EndpointRequest
	if err := r.decodeFields(f); err != nil {
		return nil, refusal(CodeBadRequest, OutcomeNotExecuted, err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// UnmarshalJSON implements json.Unmarshaler with exact member names, the required members present
// and every member of its type. It returns a *ValidationError; it does not check the I-JSON rules
// or the values, which DecodeEndpointRequest and Validate do.
func (r *EndpointRequest) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "request")
	if err != nil {
		return err
	}
	return r.decodeFields(f)
}

func (r *EndpointRequest) decodeFields(f envFields) error {
	var out EndpointRequest
	var v int64
	var class string
	if err := firstErr(
		f.integer("v", &v, memberRequired, 0),
		f.str("id", &out.ID, memberRequired),
		decodeRequired(f, "op", &out.Op),
		f.str("class", &class, memberRequired),
		f.boolean("replyExpected", &out.ReplyExpected),
		f.str("goalId", &out.GoalID, memberNonEmpty),
		decodeOptional(f, "target", &out.Target),
		decodeOptional(f, "bind", &out.Bind),
		f.ref("from", &out.From),
		f.integer("deadlineMs", &out.DeadlineMs, memberOptional, 1),
		decodeOptional(f, "correlation", &out.Correlation),
	); err != nil {
		return err
	}
	out.V, out.Class = int(v), RequestClass(class)
	out.Args = f["args"]
	if raw, ok := f["auth"]; ok {
		out.Auth = new(string)
		if !decodeString(raw, out.Auth) {
			return Invalid("auth", "", "must be a string")
		}
	}
	*r = out
	return nil
}

// Validate checks r as a responder must before anything else, and as a caller should before
// publishing: v is 1, and the id, op, class, goalId, target, bind, args, from and deadlineMs
// follow their grammars, a deadline being required on a call and on a journal submission. It
// returns an *EndpointError with outcome not-executed (unsupported-version for v, bad-request
// otherwise) whose message names the field.
func (r *EndpointRequest) Validate() error {
	if r.V != EndpointEnvelopeVersion {
		return NewEndpointError(CodeUnsupportedVersion, OutcomeNotExecuted, "envelope version %d is not supported; this peer speaks v%d", r.V, EndpointEnvelopeVersion)
	}
	if err := r.check(); err != nil {
		return refusal(CodeBadRequest, OutcomeNotExecuted, err)
	}
	return nil
}

func (r *EndpointRequest) check() error {
	if err := ValidateIDToken("id", r.ID); err != nil {
		return err
	}
	if err := Within("op", r.Op.validate()); err != nil {
		return err
	}
	if r.Class != ClassEphemeral && r.Class != ClassJournal {
		return Invalid("class", string(r.Class), `must be "ephemeral" or "journal"`)
	}
	if r.GoalID != "" {
		if err := ValidateIDToken("goalId", r.GoalID); err != nil {
			return err
		}
	}
	if r.Target != nil {
		if err := Within("target", r.Target.validate()); err != nil {
			return err
		}
	}
	if r.Bind != nil {
		if r.Op.Command == CommandDescribe {
			return Invalid("bind", "", "must be absent on describe, which resolves the incarnation to bind")
		}
		if err := Within("bind", r.Bind.validate()); err != nil {
			return err
		}
	}
	if len(r.Args) > 0 && !isJSONObject(r.Args) && string(r.Args) != string(jsonNull) {
		return Invalid("args", "", "must be a JSON object, or null for a command that takes none")
	}
	if err := Within("from", r.From.Validate()); err != nil {
		return err
	}
	switch {
	case r.DeadlineMs < 0 || r.DeadlineMs >= maxExactInteger:
		return Invalid("deadlineMs", strconv.FormatInt(r.DeadlineMs, 10), "must be a positive integer of at most 2^53-1")
	case r.DeadlineMs == 0 && (r.ReplyExpected || r.Class == ClassJournal):
		return Invalid("deadlineMs", "", "is required on a call and on a journal submission")
	}
	return nil
}

// EndpointReply is the answer to a call (SPEC §13.3): Data iff OK, Error iff not. A void output
// is the JSON null, which is present. The answering instance, its epoch and the addressee come
// from the reply subject, never from here.
type EndpointReply struct {
	V       int             `json:"v"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   *EndpointError  `json:"error,omitempty"`
	Receipt string          `json:"receipt,omitempty"`
}

// jsonNull is the JSON null, the data of a void output.
var jsonNull = json.RawMessage("null")

// DecodeEndpointReply decodes and validates a reply body as a caller must before trusting it, with
// the rules of DecodeEndpointRequest. The error is always an *EndpointError (bad-request, or
// unsupported-version for a v other than 1) with outcome unknown: a caller that cannot read a
// reply cannot know whether the command ran. Data is kept in its RFC 8785 canonical form.
func DecodeEndpointReply(data []byte) (*EndpointReply, error) {
	f, err := versionedFields(data, "reply", OutcomeUnknown)
	if err != nil {
		return nil, err
	}
	var r EndpointReply
	if err := r.decodeFields(f); err != nil {
		return nil, refusal(CodeBadRequest, OutcomeUnknown, err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// UnmarshalJSON implements json.Unmarshaler with exact member names, the required members present
// and every member of its type. It returns a *ValidationError and does not check the values.
func (r *EndpointReply) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "reply")
	if err != nil {
		return err
	}
	return r.decodeFields(f)
}

func (r *EndpointReply) decodeFields(f envFields) error {
	var out EndpointReply
	var v int64
	if err := firstErr(
		f.integer("v", &v, memberRequired, 0),
		f.str("id", &out.ID, memberRequired),
		f.boolean("ok", &out.OK),
		decodeOptional(f, "error", &out.Error),
		f.str("receipt", &out.Receipt, memberNonEmpty),
	); err != nil {
		return err
	}
	out.V = int(v)
	out.Data = f["data"]
	*r = out
	return nil
}

// Validate checks r: v is 1, the id is an id token, data is present (null counts) iff ok and
// error iff not, and the error is valid. It returns an *EndpointError with outcome unknown
// (unsupported-version for v, bad-request otherwise) whose message names the field.
func (r *EndpointReply) Validate() error {
	if r.V != EndpointEnvelopeVersion {
		return NewEndpointError(CodeUnsupportedVersion, OutcomeUnknown, "envelope version %d is not supported; this peer speaks v%d", r.V, EndpointEnvelopeVersion)
	}
	if err := r.check(); err != nil {
		return refusal(CodeBadRequest, OutcomeUnknown, err)
	}
	return nil
}

func (r *EndpointReply) check() error {
	if err := ValidateIDToken("id", r.ID); err != nil {
		return err
	}
	switch {
	case r.OK && len(r.Data) == 0:
		return Invalid("data", "", "is required on an ok reply (null for a void output)")
	case r.OK && r.Error != nil:
		return Invalid("error", "", "must be absent on an ok reply")
	case !r.OK && len(r.Data) > 0:
		return Invalid("data", "", "must be absent on an error reply")
	case !r.OK && r.Error == nil:
		return Invalid("error", "", "is required on an error reply")
	case len(r.Data) > 0 && !json.Valid(r.Data):
		return Invalid("data", "", "must be a JSON value")
	case r.Error != nil:
		return Within("error", r.Error.Validate())
	}
	return nil
}

// EventPayload is an event on the epe plane, per-goal progress included (SPEC §13.3). Events are
// notifications, not facts: nothing that needs canonical acceptance may act on one.
type EventPayload struct {
	V           int             `json:"v"`
	Topic       string          `json:"topic"`
	TS          EpochMillis     `json:"ts"`
	Data        json.RawMessage `json:"data"`
	Correlation *Correlation    `json:"correlation,omitempty"`
}

// DecodeEventPayload decodes and validates an event body: I-JSON, exact member names and the
// rules of Validate. It returns a *ValidationError; an event is never answered, so there is no
// code to choose. Data is kept in its RFC 8785 canonical form.
func DecodeEventPayload(data []byte) (*EventPayload, error) {
	f, err := canonicalFields(data, "event")
	if err != nil {
		return nil, err
	}
	var e EventPayload
	if err := e.decodeFields(f); err != nil {
		return nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

// UnmarshalJSON implements json.Unmarshaler with exact member names, the required members present
// and every member of its type. It returns a *ValidationError and does not check the values.
func (e *EventPayload) UnmarshalJSON(data []byte) error {
	f, err := envObject(data, "event")
	if err != nil {
		return err
	}
	return e.decodeFields(f)
}

func (e *EventPayload) decodeFields(f envFields) error {
	var out EventPayload
	var v int64
	if err := firstErr(
		f.integer("v", &v, memberRequired, 0),
		f.str("topic", &out.Topic, memberRequired),
		decodeOptional(f, "correlation", &out.Correlation),
	); err != nil {
		return err
	}
	raw, ok := f["ts"]
	if !ok {
		return Invalid("ts", "", "is required")
	}
	if err := out.TS.UnmarshalJSON(raw); err != nil {
		return asField(err, "ts")
	}
	out.V = int(v)
	out.Data = f["data"]
	*e = out
	return nil
}

// Validate checks e: v is 1, the topic is one or more '.'-separated id tokens, ts is
// positive and data is a JSON value. It returns a *ValidationError naming the first bad field.
func (e *EventPayload) Validate() error {
	if e.V != EndpointEnvelopeVersion {
		return Invalidf("v", strconv.Itoa(e.V), "must be %d", EndpointEnvelopeVersion)
	}
	if err := validateTopic(strings.Split(e.Topic, ".")); err != nil {
		return err
	}
	switch {
	case e.TS <= 0:
		return Invalid("ts", "", "must be a positive epoch-millisecond time")
	case len(e.Data) == 0:
		return Invalid("data", "", "is required")
	case !json.Valid(e.Data):
		return Invalid("data", "", "must be a JSON value")
	}
	return nil
}

// isJSONObject reports whether raw is one JSON object.
func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// envFields are the members of one JSON object by exact name. encoding/json matches struct
// fields case-insensitively and would let "ID" fill id where a peer reading names exactly would
// ignore it, so envelopes are decoded member by member.
type envFields map[string]json.RawMessage

// envObject splits data, a JSON object, into its members; what names it in the error.
func envObject(data []byte, what string) (envFields, error) {
	var f envFields
	if err := json.Unmarshal(data, &f); err != nil || f == nil {
		return nil, Invalid(what, "", "must be a JSON object")
	}
	return f, nil
}

// canonicalFields checks that data is I-JSON and splits its canonical form into members, so every
// raw value kept (args, data, detail members) is canonical too.
func canonicalFields(data []byte, what string) (envFields, error) {
	c, err := Canonicalize(data)
	if err != nil {
		return nil, Invalidf(what, "", "must be I-JSON: %v", err)
	}
	return envObject(c, what)
}

// versionedFields is canonicalFields for a request or a reply, reporting a failure as the
// *EndpointError to answer with: v is read before any other member, so a body of a later version
// is unsupported-version however its other members are shaped.
func versionedFields(data []byte, what string, outcome Outcome) (envFields, error) {
	f, err := canonicalFields(data, what)
	if err != nil {
		return nil, refusal(CodeBadRequest, outcome, err)
	}
	// The members are canonical, so the number 1 in any spelling (1.0, 1e0) reads "1" here.
	if v, ok := f["v"]; ok && string(v) != "1" {
		return nil, NewEndpointError(CodeUnsupportedVersion, outcome, "envelope version %s is not supported; this peer speaks v%d", shorten(string(v)), EndpointEnvelopeVersion)
	}
	return f, nil
}

// presence says whether a member may be absent.
type presence int

const (
	memberOptional presence = iota
	memberRequired
	// memberNonEmpty is optional, but a present value must not be empty: "" would re-encode as
	// absent, and the fingerprint of §13.4 tells the two apart.
	memberNonEmpty
)

// str decodes the string member name into dst.
func (f envFields) str(name string, dst *string, p presence) error {
	raw, ok := f[name]
	switch {
	case !ok && p == memberRequired:
		return Invalid(name, "", "is required")
	case !ok:
		return nil
	case !decodeString(raw, dst):
		return Invalid(name, "", "must be a string")
	case p == memberNonEmpty && *dst == "":
		return Invalid(name, "", "must not be empty when present")
	}
	return nil
}

// integer decodes the member name, an integer from least to 2^53-1, into dst.
func (f envFields) integer(name string, dst *int64, p presence, least int64) error {
	raw, ok := f[name]
	if !ok {
		if p == memberRequired {
			return Invalid(name, "", "is required")
		}
		return nil
	}
	n, err := decodeSize(raw)
	if err != nil {
		return asField(err, name)
	}
	if n < least || n >= maxExactInteger {
		return Invalidf(name, string(raw), "must be an integer from %d to 2^53-1", least)
	}
	*dst = n
	return nil
}

// boolean decodes the required boolean member name into dst.
func (f envFields) boolean(name string, dst *bool) error {
	switch raw, ok := f[name]; {
	case !ok:
		return Invalid(name, "", "is required")
	case string(raw) == "true":
		*dst = true
	case string(raw) == "false":
		*dst = false
	default:
		return Invalid(name, "", "must be a boolean")
	}
	return nil
}

// ref decodes the required EndpointRef member name with exact member names.
func (f envFields) ref(name string, dst *EndpointRef) error {
	raw, ok := f[name]
	if !ok {
		return Invalid(name, "", "is required")
	}
	r, err := envObject(raw, name)
	if err != nil {
		return err
	}
	return Within(name, firstErr(
		r.str("id", &dst.ID, memberRequired),
		r.str("name", &dst.Name, memberRequired),
		r.str("role", &dst.Role, memberOptional),
	))
}

// decodeRequired decodes the required object member name with dst's own UnmarshalJSON.
func decodeRequired(f envFields, name string, dst json.Unmarshaler) error {
	raw, ok := f[name]
	if !ok {
		return Invalid(name, "", "is required")
	}
	return Within(name, dst.UnmarshalJSON(raw))
}

// decodeOptional decodes the object member name, when present, into a new T.
func decodeOptional[T any, PT interface {
	*T
	json.Unmarshaler
}](f envFields, name string, dst **T) error {
	raw, ok := f[name]
	if !ok {
		return nil
	}
	v := PT(new(T))
	if err := v.UnmarshalJSON(raw); err != nil {
		return Within(name, err)
	}
	*dst = v
	return nil
}

// firstErr returns the first non-nil error of errs.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
