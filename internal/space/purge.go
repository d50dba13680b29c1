package space

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// The purges below run on a connection of the purger profile, which may purge the space's CHAT
// and DM streams and do nothing else; the broker refuses them to any other.

// PurgeChannel deletes channel's history, every sender's posts, from the space's CHAT stream and
// returns how many messages went. The channel's registry card stays.
func PurgeChannel(ctx context.Context, nc *nats.Conn, sp wire.Space, channel string) (uint64, error) {
	filter, err := sp.ChatFilter(channel)
	if err != nil {
		return 0, err
	}
	n, err := purge(ctx, nc, sp.ChatStream(), filter)
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", channel, err)
	}
	return n, nil
}

// PurgeHistory deletes every channel's history (the whole CHAT stream) and, with dms, every
// direct message (the whole DM stream), and returns how many messages went from each. The
// task queue, the inboxes and the delivery rail are left alone.
func PurgeHistory(ctx context.Context, nc *nats.Conn, sp wire.Space, dms bool) (chat, dm uint64, err error) {
	if chat, err = purge(ctx, nc, sp.ChatStream(), ""); err != nil {
		return 0, 0, fmt.Errorf("purge the channels' history: %w", err)
	}
	if dms {
		if dm, err = purge(ctx, nc, sp.DMStream(), ""); err != nil {
			return chat, 0, fmt.Errorf("purge the direct messages: %w", err)
		}
	}
	return chat, dm, nil
}

// purge purges stream, only the subjects filter matches when it is set.
func purge(ctx context.Context, nc *nats.Conn, stream, filter string) (uint64, error) {
	var body []byte
	if filter != "" {
		body, _ = json.Marshal(map[string]string{"filter": filter}) // strings always encode
	}
	msg, err := jsapi.Request(ctx, nc, jsapi.StreamPurge+stream, body)
	if err != nil {
		return 0, err
	}
	var res struct {
		Success bool   `json:"success"`
		Purged  uint64 `json:"purged"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &res); err != nil {
		return 0, fmt.Errorf("the answer does not decode: %w", err)
	}
	if !res.Success {
		reason := "refused"
		if res.Error != nil {
			reason = res.Error.Description
		}
		return 0, fmt.Errorf("%s", reason)
	}
	return res.Purged, nil
}
