package meshwire

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/gocotal/cotal/wire"
)

// AttachKind is a frame's kind.
type AttachKind string

// The frame kinds.
const (
	// AttachData carries terminal bytes: keystrokes in, screen output out.
	AttachData AttachKind = "data"
	// AttachReady asks the serving end for the current screen, then live output.
	AttachReady AttachKind = "ready"
	// AttachResize carries the caller's window size.
	AttachResize AttachKind = "resize"
	// AttachEnd ends the session, with its reason.
	AttachEnd AttachKind = "end"
	// AttachDrop reports output the serving end dropped because the caller fell behind.
	AttachDrop AttachKind = "drop"
)

// EndReason is why a session ended.
type EndReason string

// The end reasons.
const (
	EndProcessExit    EndReason = "process-exit"
	EndClosed         EndReason = "closed"
	EndExpired        EndReason = "expired"
	EndTargetDespawn  EndReason = "target-despawn"
	EndManagerRestart EndReason = "manager-restart"
)

// EndReasons lists every end reason.
var EndReasons = []EndReason{EndProcessExit, EndClosed, EndExpired, EndTargetDespawn, EndManagerRestart}

// MaxAttachData bounds the bytes one data frame carries, so a frame always fits the broker's
// payload limit with its encoding.
const MaxAttachData = 64 << 10

// AttachFrame is one frame of an interactive session.
type AttachFrame struct {
	Kind AttachKind `json:"k"`
	// Data is a data frame's bytes.
	Data []byte `json:"b,omitempty"`
	// Cols and Rows are a resize frame's window size.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// Reason is an end frame's reason.
	Reason EndReason `json:"reason,omitempty"`
	// Bytes is how many bytes a drop frame reports lost.
	Bytes int64 `json:"bytes,omitempty"`
}

// maxWindow bounds a resize: a terminal's size fits 16 bits a side.
const maxWindow = 1<<16 - 1

// Validate checks the frame's members against its kind: data carries at most MaxAttachData
// bytes, a resize a window of 1..65535 a side, an end a known reason, a drop a positive count,
// and no frame carries another kind's members. It returns a *ValidationError.
func (f *AttachFrame) Validate() error {
	data, window, reason, dropped := len(f.Data) > 0, f.Cols != 0 || f.Rows != 0, f.Reason != "", f.Bytes != 0
	var extra bool
	switch f.Kind {
	case AttachData:
		if len(f.Data) > MaxAttachData {
			return wire.Invalidf("b", strconv.Itoa(len(f.Data)), "must carry at most %d bytes", MaxAttachData)
		}
		extra = window || reason || dropped
	case AttachReady:
		extra = data || window || reason || dropped
	case AttachResize:
		if f.Cols < 1 || f.Cols > maxWindow || f.Rows < 1 || f.Rows > maxWindow {
			return wire.Invalidf("resize", fmt.Sprintf("%dx%d", f.Cols, f.Rows), "cols and rows must be 1 to %d", maxWindow)
		}
		extra = data || reason || dropped
	case AttachEnd:
		if !slices.Contains(EndReasons, f.Reason) {
			return wire.Invalidf("reason", string(f.Reason), "must be one of %q", EndReasons)
		}
		extra = data || window || dropped
	case AttachDrop:
		if f.Bytes < 1 {
			return wire.Invalid("bytes", strconv.FormatInt(f.Bytes, 10), "must be positive")
		}
		extra = data || window || reason
	default:
		return wire.Invalidf("k", string(f.Kind), "must be one of data, ready, resize, end, drop")
	}
	if extra {
		return wire.Invalidf("k", string(f.Kind), "a %s frame carries another kind's members", f.Kind)
	}
	return nil
}

// DecodeAttachFrame decodes and validates one frame; a member no frame has, a second value, or
// malformed base64 is refused with a *ValidationError.
func DecodeAttachFrame(raw []byte) (*AttachFrame, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f AttachFrame
	if err := dec.Decode(&f); err != nil {
		return nil, wire.Invalid("frame", "", "must be one JSON object of k, b, cols, rows, reason and bytes: "+err.Error())
	}
	if dec.More() {
		return nil, wire.Invalid("frame", "", "must be one JSON object")
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Encode returns the frame's JSON; b is standard base64.
func (f *AttachFrame) Encode() []byte {
	raw, _ := json.Marshal(f) // strings, numbers and bytes always encode
	return raw
}

// NewSessionID returns a fresh session id: 43 characters of base64url carrying 256 random bits.
func NewSessionID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error since Go 1.24
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// SessionDir is a session rail's direction: in carries caller to endpoint, out the reverse.
type SessionDir string

// The two session rails.
const (
	SessionIn  SessionDir = "in"
	SessionOut SessionDir = "out"
)

// Session ids are [A-Za-z0-9_-] tokens of 22 to 64 characters: fresh, unguessable (at least 128
// bits) and bounded.
const (
	SessionIDMinLen = 22
	SessionIDMaxLen = 64
)

// ValidateSessionID checks a session id against the id grammar and the unguessability floor.
func ValidateSessionID(id string) error {
	if len(id) < SessionIDMinLen || wire.ValidateIDToken("sessionId", id) != nil {
		return wire.Invalid("sessionId", id, "must be 22 to 64 characters of [A-Za-z0-9_-]")
	}
	return nil
}

// SessionRail returns "cotal.<space>.eps.<endpoint>.<sessionId>.<epoch>.<dir>", one epoch-pinned
// rail of a session (SPEC §13.6). The rails are core-only: no stream captures them.
func SessionRail(s wire.Space, endpoint, sessionID string, epoch int64, dir SessionDir) (string, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return "", err
	}
	if epoch < 0 {
		return "", wire.Invalid("epoch", strconv.FormatInt(epoch, 10), "must not be negative")
	}
	if dir != SessionIn && dir != SessionOut {
		return "", wire.Invalid("dir", string(dir), `must be "in" or "out"`)
	}
	return s.Subject(KindEps, wire.Token(endpoint), sessionID, strconv.FormatInt(epoch, 10), string(dir)), nil
}
