package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// Targets: the least ratio to raw NATS each path must reach, and the most DM p99 latency may
// cost over raw (issue 8).
const (
	targetMulticast = 0.90
	targetDM        = 0.85
	targetAnycast   = 0.85
	targetDMP99     = 1.25
)

// text is a message body of one text part of size bytes.
func text(size int) []wire.Part { return []wire.Part{wire.TextPart(strings.Repeat("x", size))} }

// rawBody is the body a raw publisher sends to subject: a valid Cotal message of the sender,
// routed as route says (its Channel, To or ToService), with a text part of size bytes, so both
// sides move the same bytes. It must pass the receive guard (SPEC §12): the warden deletes a
// stored message that fails it, and a raw side that published one would race the warden for
// every message and sometimes lose. Raw receivers neither decode nor de-duplicate, so one body
// serves every publish.
func rawBody(sp wire.Space, from wire.Principal, subject string, route wire.CotalMessage, size int) ([]byte, error) {
	msg := route
	msg.ID, msg.TS, msg.Space = wire.NewMessageID(), wire.MillisOf(time.Now()), string(sp)
	msg.From = wire.EndpointRef{ID: from.String(), Name: from.Actor()}
	msg.Parts = text(size)
	raw, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if _, err := wire.Guard(subject, raw); err != nil {
		return nil, fmt.Errorf("the raw body fails the receive guard: %w", err)
	}
	return raw, nil
}

// multicastCase measures one publisher posting to subs subscribers of a live channel, through
// the SDK and as raw nats.go under the same credentials.
func multicastCase(subs, size int) func(context.Context, *runner) ([]Result, error) {
	return func(ctx context.Context, r *runner) ([]Result, error) {
		f := r.fleet()
		defer f.close()
		mc, err := newMulticast(ctx, r.env, f, subs, size)
		if err != nil {
			return nil, err
		}
		res, err := r.pair(ctx, fmt.Sprintf("multicast/1x%d/%s", subs, sizeName(size)), "msgs/s", mc.cotal, mc.raw, targetMulticast)
		if err != nil {
			return nil, err
		}
		res.Note = fmt.Sprintf("posts/s, each surfaced by all %d subscribers; raw: JetStream publish with Nats-Msg-Id to core subscriptions", subs)
		return []Result{res}, nil
	}
}

// multicast is a multicast case's live channels (one per side), publisher and subscribers.
type multicast struct {
	env                 *Env
	channel, rawChannel string
	size                int
	pub                 *authority.Credential
	subs                []*authority.Credential
}

// newMulticast configures a live channel and issues its publisher and subs subscribers on f.
func newMulticast(ctx context.Context, env *Env, f *fleet, subs, size int) (*multicast, error) {
	mc := &multicast{env: env, channel: fmt.Sprintf("bench-live-%d", subs), rawChannel: fmt.Sprintf("bench-live-%d-raw", subs), size: size}
	both := []string{mc.channel, mc.rawChannel}
	for _, ch := range both {
		if err := f.setClass(ctx, ch, wire.ClassLive); err != nil {
			return nil, err
		}
	}
	var err error
	if mc.pub, err = f.agent(ctx, ledger.Request{Name: f.name("mc_pub"), AllowPublish: both}); err != nil {
		return nil, err
	}
	for i := range subs {
		cred, err := f.agent(ctx, ledger.Request{Name: f.name("mc_sub_%d", i), Subscribe: both})
		if err != nil {
			return nil, err
		}
		mc.subs = append(mc.subs, cred)
	}
	return mc, nil
}

// cotal posts through the SDK; every subscriber's handler counts what it surfaces.
func (mc *multicast) cotal(ctx context.Context, f *fleet) (side, error) {
	pub, err := f.client(ctx, mc.pub, cotal.WithPresence(false))
	if err != nil {
		return nil, err
	}
	got, parts := newCounter(), text(mc.size)
	count := func(context.Context, *cotal.Delivery) error {
		got.add()
		return nil
	}
	for _, cred := range mc.subs {
		// Joined to the Cotal side's channel only; the raw side's posts go to its own.
		if _, err := f.client(ctx, cred, cotal.WithPresence(false), cotal.WithJoin(mc.channel), cotal.WithHandler(count)); err != nil {
			return nil, err
		}
	}
	return &sendSide{got: got, per: len(mc.subs), send: func(ctx context.Context) error {
		_, err := pub.Post(ctx, mc.channel, parts)
		return err
	}}, nil
}

// raw publishes the same bytes to the same subject through JetStream with a fresh Nats-Msg-Id,
// as Post does, to core subscriptions on the channel's filter.
func (mc *multicast) raw(ctx context.Context, f *fleet) (side, error) {
	return mc.rawSide(ctx, f, false)
}

// guarded is raw whose subscribers also run the receive guard every Cotal receiver runs (SPEC
// §12) on each message before counting it: the guard's share of the gap, measured apart from
// the rest of the SDK's receive path.
func (mc *multicast) guarded(ctx context.Context, f *fleet) (side, error) {
	return mc.rawSide(ctx, f, true)
}

func (mc *multicast) rawSide(ctx context.Context, f *fleet, guard bool) (side, error) {
	_, js, err := f.conn(ctx, mc.pub)
	if err != nil {
		return nil, err
	}
	subject, _ := mc.env.Space.ChatSubject(mc.pub.Principal, mc.rawChannel) // validated at issue
	filter, _ := mc.env.Space.ChatFilter(mc.rawChannel)
	got := newCounter()
	for _, cred := range mc.subs {
		nc, _, err := f.conn(ctx, cred)
		if err != nil {
			return nil, err
		}
		sub, err := nc.Subscribe(filter, func(m *nats.Msg) {
			if guard {
				if _, err := wire.GuardOwned(m.Subject, m.Data); err != nil {
					return // never counted: the round stalls and says so
				}
			}
			got.add()
		})
		if err != nil {
			return nil, err
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			return nil, err
		}
		if err := nc.Flush(); err != nil {
			return nil, err
		}
	}
	body, err := rawBody(mc.env.Space, mc.pub.Principal, subject, wire.CotalMessage{Channel: mc.rawChannel}, mc.size)
	if err != nil {
		return nil, err
	}
	return &sendSide{got: got, per: len(mc.subs), send: rawPublish(js, subject, body)}, nil
}
