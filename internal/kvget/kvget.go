// Package kvget reads one key of a KV bucket from the stream leader, with a raw STREAM.MSG.GET.
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

	"github.com/gocotal/cotal/wire"
)

// errCodeNoMessage is JetStream's "no message found".
const errCodeNoMessage = 10037

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
	req, _ := json.Marshal(map[string]string{"last_by_subj": b.Subject(key)}) // a map of strings always encodes
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+b.Stream(), req)
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", key, b, err)
	}
	var rep struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data string `json:"data"`
			Hdrs string `json:"hdrs"`
		} `json:"message"`
		Error *struct {
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", key, b, err)
	}
	if rep.Error != nil {
		if rep.Error.ErrCode == errCodeNoMessage {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s in %s: %s (%d)", key, b, rep.Error.Desc, rep.Error.ErrCode)
	}
	if rep.Message == nil {
		return nil, nil
	}
	e := &Entry{Revision: rep.Message.Seq}
	if rep.Message.Hdrs != "" {
		if raw, err := base64.StdEncoding.DecodeString(rep.Message.Hdrs); err == nil {
			if h, err := nats.DecodeHeadersMsg(raw); err == nil {
				op := h.Get("KV-Operation")
				e.Deleted = op == "DEL" || op == "PURGE"
			}
		}
	}
	if e.Value, err = base64.StdEncoding.DecodeString(rep.Message.Data); err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", key, b, err)
	}
	return e, nil
}
