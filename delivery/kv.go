package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/wire"
)

// The daemon reads and writes buckets with the requests its credential holds: leader-served
// STREAM.MSG.GET point reads (nats.go's KV Get would switch to Direct Get, which the delivery
// profile lacks) and publishes with an expected per-subject sequence for compare-and-set.

// errCodeNoMessage is JetStream's "no message found".
const errCodeNoMessage = 10037

// errKeyExists is returned by create for a key that holds a value.
var errKeyExists = errors.New("key exists")

// entry is a key's last value and its revision (the stream sequence).
type entry struct {
	value    []byte
	revision uint64
	deleted  bool // a delete or purge marker is the last message
}

// get reads key's last message in bucket; nil when the key never existed or expired.
func (d *Daemon) get(ctx context.Context, b wire.Bucket, key string) (*entry, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": b.Subject(key)}) // a map of strings always encodes
	msg, err := d.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+b.Stream(), req)
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
		return nil, fmt.Errorf("read %s in %s: %s", key, b, rep.Error.Desc)
	}
	if rep.Message == nil {
		return nil, nil
	}
	e := &entry{revision: rep.Message.Seq}
	if rep.Message.Hdrs != "" {
		if raw, err := base64.StdEncoding.DecodeString(rep.Message.Hdrs); err == nil {
			if h, err := nats.DecodeHeadersMsg(raw); err == nil {
				op := h.Get("KV-Operation")
				e.deleted = op == "DEL" || op == "PURGE"
			}
		}
	}
	if e.value, err = base64.StdEncoding.DecodeString(rep.Message.Data); err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", key, b, err)
	}
	return e, nil
}

// getJSON reads key into v, reporting whether a live value was there.
func (d *Daemon) getJSON(ctx context.Context, b wire.Bucket, key string, v any) (*entry, error) {
	e, err := d.get(ctx, b, key)
	if err != nil || e == nil || e.deleted {
		return nil, err
	}
	if err := json.Unmarshal(e.value, v); err != nil {
		return nil, fmt.Errorf("%s in %s is not valid: %w", key, b, err)
	}
	return e, nil
}

// put writes value under key if the key's last revision is still rev (0: the key has no value).
// A deleted key counts as having no value.
func (d *Daemon) put(ctx context.Context, b wire.Bucket, key string, value []byte, rev uint64) (uint64, error) {
	ack, err := d.js.Publish(ctx, b.Subject(key), value, jetstream.WithExpectLastSequencePerSubject(rev))
	if err == nil {
		return ack.Sequence, nil
	}
	var apiErr *jetstream.APIError
	if rev == 0 && errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		last, gerr := d.get(ctx, b, key)
		if gerr != nil {
			return 0, gerr
		}
		if last != nil && last.deleted {
			return d.put(ctx, b, key, value, last.revision)
		}
		return 0, fmt.Errorf("create %s in %s: %w", key, b, errKeyExists)
	}
	return 0, fmt.Errorf("write %s in %s at revision %s: %w", key, b, strconv.FormatUint(rev, 10), err)
}

// remove writes a delete marker for key if its last revision is still rev.
func (d *Daemon) remove(ctx context.Context, b wire.Bucket, key string, rev uint64) error {
	msg := nats.NewMsg(b.Subject(key))
	msg.Header.Set("KV-Operation", "DEL")
	_, err := d.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		return fmt.Errorf("delete %s in %s: %w", key, b, err)
	}
	return nil
}
