package runhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// Events (spec §6.6) observed on the mesh. A wait observes from its step's recorded start, on
// what the mesh keeps: a message or a reply is read from the chat stream from that instant, so
// a run taken back after its host died still sees what landed while it was down, and an
// agent's health is its presence row. A wait that reaches its timeout (also counted from the
// recorded start) resolves null.

// monitor performs a monitor step: it records the agent the run watches, which down(agent)
// requires. The agent need not be up.
func (m *meshHandler) monitor(req *lang.Request) (*lang.Outcome, error) {
	agent, err := handleAgent(req.Kind, req.Args[0])
	if err != nil {
		return nil, err
	}
	m.r.watch(agent.String())
	external := lang.NewRecord()
	external.Set("agent", agent.String())
	return &lang.Outcome{External: external}, nil
}

// watch adds agent to the agents the run monitors.
func (r *hosted) watch(agent string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched == nil {
		r.watched = map[string]bool{}
	}
	r.watched[agent] = true
}

// monitored reports whether the run monitors agent: a monitor step it performed, or one its
// journal recorded before this takeover.
func (r *hosted) monitored(agent wire.Principal) bool {
	r.mu.Lock()
	watched := r.watched[agent.String()]
	r.mu.Unlock()
	if watched {
		return true
	}
	for _, e := range r.recorded {
		if e.Kind != "monitor" || e.State != lang.StateSettled || e.Status != lang.StatusOK {
			continue
		}
		var ext struct {
			Agent string `json:"agent"`
		}
		if json.Unmarshal(e.External, &ext) == nil && ext.Agent == agent.String() {
			return true
		}
	}
	return false
}

// wait performs a wait step: the first occurrence of its event since the step started, or null
// when its timeout elapses first.
func (m *meshHandler) wait(ctx context.Context, req *lang.Request) (*lang.Outcome, error) {
	ev, _ := req.Args[0].(*lang.Record)
	field := func(k string) lang.Value {
		v, _ := ev.Get(k)
		return v
	}
	wctx := ctx
	if t, ok := req.Option("timeout").(string); ok {
		d, err := lang.ParseDuration(t)
		if err != nil {
			return nil, err
		}
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, time.UnixMilli(req.StartedAt+d))
		defer cancel()
	}
	start := time.UnixMilli(req.StartedAt)
	var v lang.Value
	var err error
	switch kind, _ := field("event").(string); kind {
	case "message":
		from, _ := field("from").(string)
		matches, _ := field("matches").(string)
		v, err = m.nextMessage(wctx, req, field("channel"), from, matches, start)
	case "replied":
		var agent wire.Principal
		if agent, err = handleAgent("replied", field("agent")); err == nil {
			v, err = m.nextMessage(wctx, req, ">", agent.String(), "", start)
		}
	case "idle":
		v, err = m.idle(wctx, req, field("channel"), field("duration"), start)
	case "down":
		v, err = m.down(wctx, field("agent"))
	default:
		err = &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("wait: %q is not an event this host observes", kind)}
	}
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return &lang.Outcome{}, nil // the timeout: wait resolves null
	}
	if err != nil {
		return nil, err
	}
	return &lang.Outcome{Result: v}, nil
}

// handleAgent reads the agent principal an agent handle, or an agent id, names.
func handleAgent(effect string, v lang.Value) (wire.Principal, error) {
	id, _ := v.(string)
	if r, ok := v.(*lang.Record); ok {
		a, _ := r.Get("agent")
		id, _ = a.(string)
	}
	p, err := wire.ParsePrincipal(id)
	if err != nil {
		return wire.Principal{}, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("%s: %q names no agent: %v", effect, id, err)}
	}
	return p, nil
}

// channelOf reads a channel handle's name, or a channel name.
func channelOf(v lang.Value) string {
	if r, ok := v.(*lang.Record); ok {
		v, _ = r.Get("channel")
	}
	s, _ := v.(string)
	return s
}

// chatSince reads the chat messages matching filter that landed since start, in order, until
// each returns true or ctx ends. It reads through the run's mediator, whose credential may read
// the chat stream and nothing else of it.
func (m *meshHandler) chatSince(ctx context.Context, filter string, start time.Time, each func(*wire.CotalMessage) bool) error {
	js, err := jetstream.New(m.r.mediator)
	if err != nil {
		return err
	}
	cons, err := js.OrderedConsumer(ctx, m.h.cfg.Space.ChatStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start})
	if err != nil {
		return fmt.Errorf("read the chat stream: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			it.Stop() // ends the Next below
		case <-done:
		}
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		cm, err := wire.DecodeMessage(msg.Data())
		if err != nil {
			continue // the stream's own guard keeps these out; a reader skips what it cannot read
		}
		if each(cm) {
			return nil
		}
	}
}

// nextMessage is the first channel message since start on channel (">" for any), from sender
// when one is named and carrying matches in its text when that is given: its id, channel,
// sender, text and time.
func (m *meshHandler) nextMessage(ctx context.Context, req *lang.Request, channel lang.Value, from, matches string, start time.Time) (lang.Value, error) {
	owner, actor := "*", "*"
	var sender *wire.Principal
	if from != "" {
		p, err := wire.ParsePrincipal(from)
		if err != nil {
			return nil, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("%s: from %q names no agent: %v", req.Kind, from, err)}
		}
		owner, actor, sender = p.Owner(), p.Actor(), &p
	}
	ch := channelOf(channel)
	filter, err := m.h.cfg.Space.ChatPattern(owner, actor, ch)
	if err != nil {
		return nil, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("%s: %v", req.Kind, err)}
	}
	if err := m.mayRead(ctx, req, sender, ch); err != nil {
		return nil, err
	}
	var out *lang.Record
	err = m.chatSince(ctx, filter, start, func(cm *wire.CotalMessage) bool {
		text := messageText(cm)
		if matches != "" && !strings.Contains(text, matches) {
			return false
		}
		out = lang.NewRecord()
		out.Set("id", cm.ID)
		out.Set("channel", cm.Channel)
		out.Set("from", cm.From.ID)
		out.Set("text", text)
		out.Set("ts", float64(cm.TS))
		return true
	})
	return out, err
}

// messageText is a message's text parts, joined by new lines.
func messageText(cm *wire.CotalMessage) string {
	var parts []string
	for _, p := range cm.Parts {
		if p.Kind == wire.PartText {
			parts = append(parts, p.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// idle waits until channel has been quiet for duration: no message landed on it for that long,
// counted from start or from the last message since. It answers when the quiet began.
func (m *meshHandler) idle(ctx context.Context, req *lang.Request, channel, duration lang.Value, start time.Time) (lang.Value, error) {
	ms, err := lang.ParseDuration(fmt.Sprint(duration))
	if err != nil {
		return nil, err
	}
	quiet := time.Duration(ms) * time.Millisecond
	ch := channelOf(channel)
	filter, err := m.h.cfg.Space.ChatFilter(ch)
	if err != nil {
		return nil, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: "idle: " + err.Error()}
	}
	if err := m.mayRead(ctx, req, nil, ch); err != nil {
		return nil, err
	}
	landed := make(chan time.Time, 64)
	failed := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		failed <- m.chatSince(rctx, filter, start, func(cm *wire.CotalMessage) bool {
			select {
			case landed <- time.UnixMilli(int64(cm.TS)):
			case <-rctx.Done():
			}
			return false
		})
	}()
	last := start
	for {
		timer := time.NewTimer(time.Until(last.Add(quiet)))
		select {
		case at := <-landed:
			timer.Stop()
			if at.After(last) {
				last = at
			}
		case err := <-failed:
			timer.Stop()
			return nil, err // a channel it cannot read is not taken for a quiet one
		case <-timer.C:
			out := lang.NewRecord()
			out.Set("channel", ch)
			out.Set("since", float64(last.UnixMilli()))
			return out, nil
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

// down waits until a monitored agent is down: its presence row gone, marked offline, or stale
// past the liveness window. It answers the agent, why it is down and when that was seen.
func (m *meshHandler) down(ctx context.Context, agentV lang.Value) (lang.Value, error) {
	agent, err := handleAgent("down", agentV)
	if err != nil {
		return nil, err
	}
	if !m.r.monitored(agent) {
		return nil, &lang.EffectError{Code: "L4000", Kind: "handler-fault", Message: fmt.Sprintf("down(%s): the run does not monitor it: monitor(agent) first", agent)}
	}
	js, err := jetstream.New(m.r.mediator)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, string(m.h.cfg.Space.PresenceBucket()))
	if err != nil {
		return nil, fmt.Errorf("open the presence bucket: %w", err)
	}
	w, err := kv.Watch(ctx, wire.PresenceKey(agent))
	if err != nil {
		return nil, fmt.Errorf("watch %s's presence: %w", agent, err)
	}
	defer func() { _ = w.Stop() }()
	reason := ""
	var seen time.Time // the last heartbeat
	stale := time.NewTimer(time.Hour)
	defer stale.Stop()
	for reason == "" {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("the watch of %s's presence ended", agent)
			case e == nil: // the current row was delivered; none means the agent is not up
				if seen.IsZero() {
					reason = "absent"
				}
			case e.Operation() != jetstream.KeyValuePut:
				reason = "left"
			default:
				var p wire.Presence
				if json.Unmarshal(e.Value(), &p) != nil || p.Status == wire.StatusOffline {
					reason = "offline"
					break
				}
				seen = time.UnixMilli(int64(p.TS))
				stale.Reset(time.Until(seen.Add(wire.LivenessWindow)))
			}
		case <-stale.C:
			reason = "stale"
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := lang.NewRecord()
	out.Set("agent", agent.String())
	out.Set("reason", reason)
	out.Set("at", float64(now()))
	return out, nil
}
