package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/jsapi"
)

// The JetStream API's snapshot and restore, which nats.go does not wrap: a snapshot streams the
// stream's store (messages, and its consumers with their state) as numbered chunks, each
// acknowledged by the receiver; a restore takes the same chunks back, each acknowledged by the
// server, then an empty one that ends it.

// chunkSize is the size of a snapshot's and a restore's chunks.
const chunkSize = 128 << 10

// apiError is a JetStream API response's error.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%d)", e.Description, e.ErrCode) }

// snapshot writes stream's snapshot, consumers included, to w, and returns the stream's config
// and state as the server answered them, which a restore gives back.
func snapshot(ctx context.Context, nc *nats.Conn, stream string, w io.Writer) (config, state json.RawMessage, err error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()                                                  // the snapshot is over either way
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "chunk_size": chunkSize}) // always encodes
	msg, err := jsapi.Request(ctx, nc, "$JS.API.STREAM.SNAPSHOT."+stream, req)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", stream, err)
	}
	var resp struct {
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
		Error  *apiError       `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: the answer does not decode: %w", stream, err)
	}
	if resp.Error != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", stream, resp.Error)
	}
	for {
		chunk, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: %w", stream, err)
		}
		if len(chunk.Data) == 0 && chunk.Reply == "" {
			// The end: an empty message, its status 204 (or none, after a store that fit in its
			// last, short chunk) when the whole store was sent, any other a failure.
			if status := chunk.Header.Get("Status"); status != "" && status != "204" {
				return nil, nil, fmt.Errorf("snapshot %s: the server ended it with %s %s", stream, status, chunk.Header.Get("Description"))
			}
			return resp.Config, resp.State, nil
		}
		if _, err := w.Write(chunk.Data); err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: %w", stream, err)
		}
		if chunk.Reply != "" {
			if err := nc.Publish(chunk.Reply, nil); err != nil {
				return nil, nil, fmt.Errorf("snapshot %s: acknowledge a chunk: %w", stream, err)
			}
		}
	}
}

// restore creates stream, which must not exist, from a snapshot read from r, with the config and
// state the snapshot was taken with.
func restore(ctx context.Context, nc *nats.Conn, stream string, config, state json.RawMessage, r io.Reader) error {
	req, _ := json.Marshal(map[string]json.RawMessage{"config": config, "state": state}) // raw JSON encodes
	msg, err := jsapi.Request(ctx, nc, "$JS.API.STREAM.RESTORE."+stream, req)
	if err != nil {
		return fmt.Errorf("restore %s: %w", stream, err)
	}
	var resp struct {
		DeliverSubject string    `json:"deliver_subject"`
		Error          *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("restore %s: the answer does not decode: %w", stream, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("restore %s: %w", stream, resp.Error)
	}
	buf := make([]byte, chunkSize)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if err := restoreChunk(ctx, nc, resp.DeliverSubject, buf[:n]); err != nil {
				return fmt.Errorf("restore %s: %w", stream, err)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("restore %s: read the snapshot: %w", stream, rerr)
		}
	}
	// An empty chunk ends the restore; the answer is the stream's info, or why it failed.
	end, err := nc.RequestWithContext(ctx, resp.DeliverSubject, nil)
	if err != nil {
		return fmt.Errorf("restore %s: finish: %w", stream, err)
	}
	var done struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(end.Data, &done); err != nil {
		return fmt.Errorf("restore %s: the final answer does not decode: %w", stream, err)
	}
	if done.Error != nil {
		return fmt.Errorf("restore %s: %w", stream, done.Error)
	}
	return nil
}

// restoreChunk sends one chunk and waits for the server to take it: an empty answer, or the
// error that ended the restore.
func restoreChunk(ctx context.Context, nc *nats.Conn, subject string, chunk []byte) error {
	ack, err := nc.RequestWithContext(ctx, subject, chunk)
	if err != nil {
		return err
	}
	if len(ack.Data) == 0 {
		return nil
	}
	var resp struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(ack.Data, &resp) == nil && resp.Error != nil {
		return resp.Error
	}
	return nil
}
