package cotal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/wire"
)

// ErrJoinRefused is returned by Join when the broker refuses the subscription (the channel is
// outside the credential's read ACL), and reported on Errors when it refuses it later.
var ErrJoinRefused = errors.New("join refused by the broker")

// JoinResult describes a confirmed join.
type JoinResult struct {
	Channel string
	// Config is the channel's effective configuration, from the one resolution in wire.
	Config wire.EffectiveChannel
	// Watermark is the CHAT stream's last sequence when the join began: history up to it was
	// backfilled, live messages after it flow.
	Watermark uint64
	// Backfilled counts the historical messages surfaced.
	Backfilled int
	// Durable reports that the delivery daemon established durable membership (a durable
	// channel, a client with a lifecycle); its copies then arrive through the dlv_ durable.
	Durable bool
	// Generation is the durable membership's generation, which a leave names.
	Generation int64
	// Backstop explains, on a durable channel, why the join is live only.
	Backstop string
	// BackstopErr is the error behind Backstop when the delivery daemon was asked and did not
	// answer with a membership: a *wire.ControlError when it refused (errors.As; its Retry
	// reports whether joining again may establish the backstop), nats.ErrNoResponders when no
	// daemon serves, or the transport's error. It is nil when Durable, and when the daemon
	// answered but could not establish the backstop (Backstop then carries its reason).
	BackstopErr error
}

// joined is one live channel subscription.
type joined struct {
	sub        *nats.Subscription
	stop       context.CancelFunc
	generation int64 // of the durable membership, 0 when live only
}

// readTimeout bounds a registry read when the caller's context has no deadline.
const readTimeout = 5 * time.Second

// historyBatch is how many messages one history fetch asks for.
const historyBatch = 256

// Join subscribes to a channel (a concrete channel or a pattern such as team.>), with no
// privileged mediation (SPEC §7): the join counts only once the broker accepted the
// subscription, else ErrJoinRefused. Then, if the channel's effective config has replay on, it
// backfills the channel's history up to the watermark captured before subscribing, surfacing
// those messages as historical; live copies of them are dropped by id. A later refusal drops
// the join and is reported on Errors.
func (c *Client) Join(ctx context.Context, channel string) (*JoinResult, error) {
	if err := wire.ValidateChannelPattern(channel); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if _, already := c.joined[channel]; already {
		c.mu.Unlock()
		return nil, fmt.Errorf("already joined %q", channel)
	}
	c.joined[channel] = nil // reserved while the join is under way
	c.mu.Unlock()
	res, err := c.join(ctx, channel)
	if err != nil {
		c.mu.Lock()
		if j, ok := c.joined[channel]; ok && j == nil {
			delete(c.joined, channel)
		}
		c.mu.Unlock()
		return nil, err
	}
	return res, nil
}

// join does the work of Join for a channel reserved in c.joined.
func (c *Client) join(ctx context.Context, channel string) (*JoinResult, error) {
	res := &JoinResult{Channel: channel}
	var err error
	if res.Config, err = c.ChannelConfig(ctx, channel); err != nil {
		return nil, err
	}
	chat, err := c.js.Stream(ctx, c.space.ChatStream())
	if err != nil {
		return nil, fmt.Errorf("join %s: read the CHAT watermark: %w", channel, err)
	}
	res.Watermark = chat.CachedInfo().State.LastSeq
	filter, err := c.space.ChatFilter(channel)
	if err != nil {
		return nil, err
	}
	sub, err := c.nc.SubscribeSync(filter)
	if err != nil {
		return nil, fmt.Errorf("join %s: %w", channel, err)
	}
	first, err := c.confirm(sub)
	if err != nil {
		_ = sub.Unsubscribe() // refused: the broker holds no such subscription anyway
		return nil, fmt.Errorf("join %s: %w", channel, err)
	}
	if res.Config.Replay && wire.IsConcreteChannel(channel) && res.Watermark > 0 {
		if res.Backfilled, err = c.backfill(ctx, filter, res.Config.ReplayWindow, res.Watermark); err != nil {
			_ = sub.Unsubscribe() // the join failed as a whole
			return nil, fmt.Errorf("join %s: backfill: %w", channel, err)
		}
	}
	if res.Config.DeliveryClass == wire.ClassDurable && wire.IsConcreteChannel(channel) && c.grant != nil && c.grant.Lifecycle != "" {
		c.durableJoin(ctx, res)
	}
	jctx, stop := context.WithCancel(c.ctx)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		stop()
		_ = sub.Unsubscribe() // closing anyway
		return nil, ErrClosed
	}
	c.joined[channel] = &joined{sub: sub, stop: stop, generation: res.Generation}
	c.goFn(func() { c.readLive(jctx, channel, sub, first) })
	c.mu.Unlock()
	return res, nil
}

// confirm makes the broker's verdict on a new subscription known: a flush round trip, after
// which a refusal has been recorded on the subscription. A message already waiting proves
// acceptance and is returned to be delivered first.
func (c *Client) confirm(sub *nats.Subscription) (*nats.Msg, error) {
	if err := c.nc.Flush(); err != nil {
		return nil, err
	}
	msg, err := sub.NextMsg(time.Millisecond)
	switch {
	case errors.Is(err, nats.ErrPermissionViolation):
		return nil, fmt.Errorf("%w: %v", ErrJoinRefused, err)
	case errors.Is(err, nats.ErrTimeout):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return msg, nil
}

// readLive surfaces a joined channel's live messages until the join ends.
func (c *Client) readLive(ctx context.Context, channel string, sub *nats.Subscription, first *nats.Msg) {
	if first != nil {
		c.deliver.deliver(first.Subject, first.Data, false, nil)
	}
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		switch {
		case errors.Is(err, nats.ErrSlowConsumer):
			c.report(fmt.Errorf("channel %s: live messages were dropped: %w", channel, err))
			continue
		case errors.Is(err, nats.ErrPermissionViolation):
			c.dropJoin(channel)
			c.report(fmt.Errorf("channel %s: %w: %v", channel, ErrJoinRefused, err))
			return
		case err != nil:
			if ctx.Err() == nil {
				c.dropJoin(channel)
				c.report(fmt.Errorf("channel %s: live subscription ended: %w", channel, err))
			}
			return
		}
		c.deliver.deliver(msg.Subject, msg.Data, false, nil)
	}
}

func (c *Client) dropJoin(channel string) {
	c.mu.Lock()
	j := c.joined[channel]
	if j != nil {
		delete(c.joined, channel)
	}
	c.mu.Unlock()
	if j != nil {
		j.stop()
	}
}

// Leave ends a channel's live subscription and, on a durable channel, its durable membership:
// a hard boundary, after which the backstop hands over nothing posted later. Leaving the last
// channel is fine. A delivery daemon's refusal of the durable leave is a *wire.ControlError.
func (c *Client) Leave(ctx context.Context, channel string) error {
	c.mu.Lock()
	j, ok := c.joined[channel]
	if ok && j == nil {
		c.mu.Unlock()
		return fmt.Errorf("the join of %q is still under way", channel)
	}
	delete(c.joined, channel)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("not joined to %q", channel)
	}
	j.stop()
	err := j.sub.Unsubscribe()
	if j.generation > 0 {
		err = errors.Join(err, c.durableLeave(ctx, channel, j.generation))
	}
	return err
}

// Channels returns the channels joined, sorted.
func (c *Client) Channels() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.joined))
	for ch, j := range c.joined {
		if j != nil {
			out = append(out, ch)
		}
	}
	slices.Sort(out)
	return out
}

// backfill reads one channel's history up to the watermark through the lifecycle's chathist
// consumer (created for the read and deleted after, as its name is fixed per lifecycle) and
// surfaces it as historical. It returns how many messages it surfaced.
func (c *Client) backfill(ctx context.Context, filter string, window time.Duration, watermark uint64) (int, error) {
	if c.grant == nil || c.grant.Lifecycle == "" {
		return 0, nil // no lifecycle, no history grant: live only
	}
	c.histMu.Lock()
	defer c.histMu.Unlock()
	stream := c.space.ChatStream()
	name := wire.ChatHistConsumer(wire.Lifecycle{Principal: c.me, UID: c.grant.Lifecycle})
	cfg := jetstream.ConsumerConfig{
		Name: name, FilterSubject: filter, AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, InactiveThreshold: wire.ChatHistInactiveThreshold,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 1,
	}
	if window > 0 {
		start := time.Now().Add(-window)
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &start
	}
	_ = c.js.DeleteConsumer(ctx, stream, name) // a leftover from a crashed read; usually absent
	cons, err := c.js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.js.DeleteConsumer(context.WithoutCancel(ctx), stream, name) }() // the inactive threshold reaps it otherwise
	if cons.CachedInfo().NumPending == 0 {
		return 0, nil
	}
	n := 0
	for {
		msgs, ferr := jsapi.Fetch(ctx, cons, historyBatch, jetstream.FetchMaxWait(2*time.Second))
		for _, msg := range msgs {
			meta, err := msg.Metadata()
			if err != nil {
				return n, err
			}
			if meta.Sequence.Stream > watermark {
				return n, nil
			}
			if out, _ := c.deliver.deliver(msg.Subject(), msg.Data(), true, nil); out == ack {
				n++
			}
			if meta.Sequence.Stream == watermark || meta.NumPending == 0 {
				return n, nil
			}
		}
		if ferr != nil {
			return n, ferr
		}
		if len(msgs) == 0 {
			return n, nil
		}
	}
}

// ChannelConfig returns a channel's effective configuration, read from the channels bucket with
// leader-served point reads (the grant holds no Direct Get).
func (c *Client) ChannelConfig(ctx context.Context, channel string) (wire.EffectiveChannel, error) {
	var ch *wire.ChannelConfig
	var defaults *wire.ChannelDefaults
	if wire.IsConcreteChannel(channel) {
		raw, err := c.getKey(ctx, c.space.ChannelsBucket(), channel)
		if err != nil {
			return wire.EffectiveChannel{}, err
		}
		if raw != nil {
			if ch, err = wire.DecodeChannelConfig(raw); err != nil {
				return wire.EffectiveChannel{}, fmt.Errorf("channel %s config: %w", channel, err)
			}
		}
	}
	raw, err := c.getKey(ctx, c.space.ChannelsBucket(), wire.ChannelDefaultsKey)
	if err != nil {
		return wire.EffectiveChannel{}, err
	}
	if raw != nil {
		if defaults, err = wire.DecodeChannelDefaults(raw); err != nil {
			return wire.EffectiveChannel{}, fmt.Errorf("channel defaults: %w", err)
		}
	}
	return wire.ResolveChannel(ch, defaults), nil
}

// getKey reads a key's last value with a raw, leader-served STREAM.MSG.GET: nats.go's KV and
// stream helpers switch to Direct Get when a stream allows it, which agents may not use. It
// returns nil for a missing or deleted key.
func (c *Client) getKey(ctx context.Context, b wire.Bucket, key string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readTimeout)
		defer cancel()
	}
	e, err := kvget.Get(ctx, c.nc, b, key)
	switch {
	case errors.Is(err, kvget.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, c.publishError("read "+key, jsapi.MsgGet+b.Stream(), err)
	case e.Deleted:
		return nil, nil
	}
	return e.Value, nil
}
