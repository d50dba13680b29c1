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
	"fmt"

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
	// Deleted reports that the last message is a delete or purge marker.
	Deleted bool
}

// Get returns key's last message in bucket b, or nil when the key has none (it never existed,
// or its message expired).
func Get(ctx context.Context, nc *nats.Conn, b wire.Bucket, key string) (*Entry, error) {
	m, err := ReadLast(ctx, nc, b.Stream(), b.Subject(key))
	if err != nil || m == nil {
		if err != nil {
			err = fmt.Errorf("read %s in %s: %w", key, b, err)
		}
		return nil, err
	}
	op := m.Header.Get("KV-Operation")
	return &Entry{Value: m.Data, Revision: m.Seq, Deleted: op == "DEL" || op == "PURGE"}, nil
}

// Stored is one message of a stream as its leader stores it.
type Stored struct {
	Subject string
	Seq     uint64
	Data    []byte
	Header  nats.Header
}

// ReadLast returns the last message stored under subject in stream, or nil when there is none.
func ReadLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*Stored, error) {
	return read(ctx, nc, stream, map[string]any{"last_by_subj": subject})
}

// ReadSeq returns the message stored at seq in stream, or nil when there is none (it was never
// stored, or was deleted or taken).
func ReadSeq(ctx context.Context, nc *nats.Conn, stream string, seq uint64) (*Stored, error) {
	return read(ctx, nc, stream, map[string]any{"seq": seq})
}

func read(ctx context.Context, nc *nats.Conn, stream string, req map[string]any) (*Stored, error) {
	body, _ := json.Marshal(req) // strings and integers always encode
	msg, err := nc.RequestWithContext(ctx, jsapi.MsgGet+stream, body)
	if err != nil {
		return nil, err
	}
	var rep struct {
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Data    string `json:"data"`
			Hdrs    string `json:"hdrs"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return nil, err
	}
	if rep.Error != nil {
		if rep.Error.ErrorCode == jsapi.ErrCodeNoMessage {
			return nil, nil
		}
		return nil, rep.Error // callers branch on it with errors.As, as on nats.go's own
	}
	if rep.Message == nil {
		return nil, nil
	}
	m := &Stored{Subject: rep.Message.Subject, Seq: rep.Message.Seq, Header: nats.Header{}}
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
