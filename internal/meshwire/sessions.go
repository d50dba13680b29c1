package meshwire

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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

// EndReasons lists the end reasons a manager sends. The wire takes any bounded reason token
// (ValidEndReason), so another endpoint may state its own.
var EndReasons = []EndReason{EndProcessExit, EndClosed, EndExpired, EndTargetDespawn, EndManagerRestart}

// ValidEndReason reports whether r is an end reason the wire carries: lowercase kebab case, a
// letter then up to 47 letters, digits and hyphens.
func ValidEndReason(r EndReason) bool {
	if len(r) < 1 || len(r) > 48 || r[0] < 'a' || r[0] > 'z' {
		return false
	}
	for _, c := range []byte(r) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// MaxAttachData bounds the bytes one data frame a cotal-go party sends carries, so a frame always
// fits the broker's payload limit inside its rail envelope.
const MaxAttachData = 64 << 10

// maxAttachBase64 bounds a received data frame's base64 text.
const maxAttachBase64 = 4 << 20

// MaxWindowSide bounds a resize frame's columns and rows.
const MaxWindowSide = 100_000

// AttachFrame is one frame of an interactive terminal session, the value a rail data frame
// carries.
type AttachFrame struct {
	Kind AttachKind
	// Data is a data frame's bytes.
	Data []byte
	// Cols and Rows are a resize frame's window size.
	Cols int
	Rows int
	// Reason is an end frame's reason.
	Reason EndReason
	// Bytes is how many bytes a drop frame reports lost.
	Bytes int64
}

// DecodeAttachFrame decodes and validates one terminal frame: one JSON object with exactly its
// kind's members; a data frame's b standard padded base64; a resize's cols and rows integers
// from 1 to MaxWindowSide; an end's reason a valid reason token; a drop's bytes a positive
// integer. Anything else is refused with a *wire.ValidationError.
func DecodeAttachFrame(raw []byte) (*AttachFrame, error) {
	o, err := DecodeClosed(raw, "terminal frame", "k", "b", "cols", "rows", "reason", "bytes")
	if err != nil {
		return nil, err
	}
	var kind string
	if o["k"] == nil || json.Unmarshal(o["k"], &kind) != nil {
		return nil, wire.Invalid("k", string(o["k"]), "must be one of data, ready, resize, end, drop")
	}
	f := &AttachFrame{Kind: AttachKind(kind)}
	switch f.Kind {
	case AttachReady:
		err = OnlyMembers(o, "ready frame", "k")
	case AttachData:
		if err = OnlyMembers(o, "data frame", "k", "b"); err == nil {
			f.Data, err = decodeBase64(o["b"])
		}
	case AttachResize:
		if err = OnlyMembers(o, "resize frame", "k", "cols", "rows"); err == nil {
			var cols, rows int64
			cols, err = SafeInteger(o["cols"], "cols", 1)
			if err == nil {
				rows, err = SafeInteger(o["rows"], "rows", 1)
			}
			if err == nil && (cols > MaxWindowSide || rows > MaxWindowSide) {
				err = wire.Invalidf("resize", fmt.Sprintf("%dx%d", cols, rows), "cols and rows must be 1 to %d", MaxWindowSide)
			}
			f.Cols, f.Rows = int(cols), int(rows)
		}
	case AttachEnd:
		if err = OnlyMembers(o, "end frame", "k", "reason"); err == nil {
			var r string
			if o["reason"] == nil || json.Unmarshal(o["reason"], &r) != nil || !ValidEndReason(EndReason(r)) {
				err = wire.Invalid("reason", string(o["reason"]), "must be a lowercase kebab-case token of 1 to 48 characters")
			}
			f.Reason = EndReason(r)
		}
	case AttachDrop:
		if err = OnlyMembers(o, "drop frame", "k", "bytes"); err == nil {
			f.Bytes, err = SafeInteger(o["bytes"], "bytes", 1)
		}
	default:
		err = wire.Invalid("k", kind, "must be one of data, ready, resize, end, drop")
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// decodeBase64 reads a data frame's b: a string of standard padded base64, at most
// maxAttachBase64 characters, with no whitespace.
func decodeBase64(raw json.RawMessage) ([]byte, error) {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil {
		return nil, wire.Invalid("b", string(raw), "must be a string of base64")
	}
	if len(s) > maxAttachBase64 || len(s)%4 != 0 || !isBase64(s) {
		return nil, wire.Invalid("b", s, "must be standard padded base64")
	}
	return base64.StdEncoding.DecodeString(s)
}

// isBase64 reports whether s is [A-Za-z0-9+/]* followed by at most two '='.
func isBase64(s string) bool {
	body := strings.TrimRight(s, "=")
	if len(s)-len(body) > 2 {
		return false
	}
	for _, c := range []byte(body) {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '+' && c != '/' {
			return false
		}
	}
	return true
}

// Encode returns the frame's JSON, compact, members in the order k then the kind's own; a data
// frame always carries b, empty or not.
func (f *AttachFrame) Encode() []byte {
	b := append(make([]byte, 0, 32+base64.StdEncoding.EncodedLen(len(f.Data))), `{"k":`...)
	b = strconv.AppendQuote(b, string(f.Kind))
	switch f.Kind {
	case AttachData:
		b = append(b, `,"b":"`...)
		b = base64.StdEncoding.AppendEncode(b, f.Data)
		b = append(b, '"')
	case AttachResize:
		b = append(b, `,"cols":`...)
		b = strconv.AppendInt(b, int64(f.Cols), 10)
		b = append(b, `,"rows":`...)
		b = strconv.AppendInt(b, int64(f.Rows), 10)
	case AttachEnd:
		b = append(b, `,"reason":`...)
		b = strconv.AppendQuote(b, string(f.Reason))
	case AttachDrop:
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, f.Bytes, 10)
	}
	return append(b, '}')
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
