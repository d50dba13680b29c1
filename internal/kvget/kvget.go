// Package kvget reads one key of a KV bucket, or one message of a stream, from the stream leader,
// with a raw STREAM.MSG.GET.
// nats.go's KV and stream helpers switch to Direct Get when a stream allows it, which is served
// by any replica (possibly stale) and which least-privilege credentials may not use; a read that
// decides or fences must come from the leader.
package kvget

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// Entry is a key's last message in its bucket's stream.
type Entry struct {
	Value []byte
	// Revision is the message's stream sequence, the revision a CAS write expects.
	Revision uint64
	// Deleted reports that the last message is a delete or purge marker, or the server's marker
	// of a row whose time to live ran out.
	Deleted bool
	// Written is when the server stored the message.
	Written time.Time
}

// Get returns key's last message in bucket b. A key with none (it never existed, or its message
// expired) is ErrNotFound; a delete or purge marker is an Entry with Deleted set.
func Get(ctx context.Context, nc *nats.Conn, b wire.Bucket, key string) (*Entry, error) {
	m, err := read(ctx, nc, b.Stream(), map[string]any{"last_by_subj": b.Subject(key)})
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", key, b, err)
	}
	// A delete or purge marker, or the marker the server writes when a row's time to live ran
	// out (it carries only the reason).
	op := m.Header.Get(jsapi.KVOperation)
	deleted := op == jsapi.KVDelete || op == jsapi.KVPurge || m.Header.Get(jsapi.MarkerReason) != ""
	return &Entry{Value: m.Data, Revision: m.Seq, Deleted: deleted, Written: m.Time}, nil
}

// Stored is one message of a stream as its leader stores it.
type Stored struct {
	Subject string
	Seq     uint64
	Data    []byte
	Header  nats.Header
	// Time is when the server stored the message.
	Time time.Time
}

// ReadLast returns the last message stored under subject in stream; ErrNotFound when there is
// none.
func ReadLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*Stored, error) {
	m, err := read(ctx, nc, stream, map[string]any{"last_by_subj": subject})
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w on %s in %s", err, subject, stream)
	}
	return m, err
}

// ReadFirst returns the first message stored under subject (which may hold wildcards) in stream;
// ErrNotFound when there is none.
func ReadFirst(ctx context.Context, nc *nats.Conn, stream, subject string) (*Stored, error) {
	m, err := read(ctx, nc, stream, map[string]any{"seq": 1, "next_by_subj": subject})
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w on %s in %s", err, subject, stream)
	}
	return m, err
}

// Scan calls fn with every message stored under subject (which may hold wildcards) in stream, in
// stream order, from the leader: one point read per message, for a small set of keys.
func Scan(ctx context.Context, nc *nats.Conn, stream, subject string, fn func(*Stored) error) error {
	for seq := uint64(1); ; {
		m, err := read(ctx, nc, stream, map[string]any{"seq": seq, "next_by_subj": subject})
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
		seq = m.Seq + 1
	}
}

// ReadSeq returns the message stored at seq in stream; ErrNotFound when there is none (it was
// never stored, or was deleted or taken).
func ReadSeq(ctx context.Context, nc *nats.Conn, stream string, seq uint64) (*Stored, error) {
	m, err := read(ctx, nc, stream, map[string]any{"seq": seq})
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w at seq %d in %s", err, seq, stream)
	}
	return m, err
}

// read sends one STREAM.MSG.GET; a reply that there is no such message is ErrNotFound, unwrapped.
func read(ctx context.Context, nc *nats.Conn, stream string, req map[string]any) (*Stored, error) {
	body, _ := json.Marshal(req) // strings and integers always encode
	msg, err := jsapi.Request(ctx, nc, jsapi.MsgGet+stream, body)
	if err != nil {
		return nil, err
	}
	var rep struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Data    string    `json:"data"`
			Hdrs    string    `json:"hdrs"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return nil, err
	}
	if rep.Error != nil {
		if rep.Error.ErrorCode == jsapi.ErrCodeNoMessage {
			return nil, ErrNotFound
		}
		return nil, rep.Error // callers branch on it with errors.As, as on nats.go's own
	}
	if rep.Message == nil {
		return nil, ErrNotFound
	}
	m := &Stored{Subject: rep.Message.Subject, Seq: rep.Message.Seq, Header: nats.Header{}, Time: rep.Message.Time}
	if rep.Message.Hdrs != "" {
		if raw, err := base64.StdEncoding.DecodeString(rep.Message.Hdrs); err == nil {
			if h, err := nats.DecodeHeadersMsg(raw); err == nil {
				m.Header = h
			}
		}
	}
	if m.Data, err = base64.StdEncoding.DecodeString(rep.Message.Data); err != nil {
		return nil, err
	}
	return m, nil
}
