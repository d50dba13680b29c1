package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/connz"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The membership feed (SPEC §8) is the space's membership bucket, cotal_membership_<space>: for
// each principal that reads a channel, under its dot-form, the union of the chat subscriptions
// the broker's connection view shows its connections holding (live, wildcards kept) and its open
// durable memberships (durable), with when they were observed. The active daemon writes it, as
// the only writer of the memberships it derives it from. It is display only: nothing reads it to
// decide a delivery, an ACL or an authorization, and a failure to write it affects nothing else.
//
// No event marks a live subscribe or unsubscribe, so the feed is reconciled every
// FeedConfig.Interval. A connection opening or closing (the account's CONNECT and DISCONNECT
// events, and an instance's presence appearing or going away) and a durable membership written
// by the daemon each bring the next reconcile forward.

// FeedConfig configures the membership feed a daemon writes while it is active.
type FeedConfig struct {
	// Observer is a connection of the system account allowed to request the space account's
	// connection list (jsapi.AccountConnz). A grant to subscribe the account's CONNECT and
	// DISCONNECT events makes the feed follow connections at once; without it the feed still
	// follows them, from presence and at each Interval.
	Observer *nats.Conn
	// Account is the public key of the space's account.
	Account string
	// Writer is the connection the feed is read and written on: it needs the grants of the
	// membership-rw profile (STREAM.INFO, the watch's consumer verbs and writes on the
	// membership bucket).
	Writer *nats.Conn
	// Interval is how often the feed is reconciled when nothing brings it forward (default 15 s).
	Interval time.Duration
}

// Feed timing: a trigger waits feedSettle (or twice the last reconcile's time, if longer) for the
// ones that follow it (a connect storm) before the reconcile they share, and one reconcile takes
// at most feedTimeout.
const (
	feedInterval = 15 * time.Second
	feedSettle   = 400 * time.Millisecond
	feedTimeout  = 10 * time.Second
)

// feed writes the membership feed during one active term.
type feed struct {
	d    *Daemon
	cfg  FeedConfig
	js   jetstream.JetStream // on cfg.Writer
	kick chan struct{}
}

// startFeed starts the membership feed of the term whose context is ctx, when the daemon has
// one configured; stop ends it and waits for it.
func (d *Daemon) startFeed(ctx context.Context) (stop func(), err error) {
	cfg := d.cfg.Feed
	if cfg == nil {
		return func() {}, nil
	}
	js, err := jetstream.New(cfg.Writer)
	if err != nil {
		return nil, fmt.Errorf("membership feed: %w", err)
	}
	f := &feed{d: d, cfg: *cfg, js: js, kick: make(chan struct{}, 1)}
	var subs []*nats.Subscription
	for _, subject := range []string{jsapi.AccountConnect(cfg.Account), jsapi.AccountDisconnect(cfg.Account)} {
		sub, err := cfg.Observer.Subscribe(subject, func(*nats.Msg) { f.trigger() })
		if err != nil {
			d.log.Warn("membership feed: connection events unavailable; following presence and the interval", "subject", subject, "err", err)
			continue
		}
		subs = append(subs, sub)
	}
	d.mu.Lock()
	d.feed = f
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { // owned: stop waits for it
		defer close(done)
		f.run(ctx)
	}()
	return func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		d.mu.Lock()
		d.feed = nil
		d.mu.Unlock()
		<-done
	}, nil
}

// membershipChanged brings the next reconcile of the term's membership feed, if any, forward.
func (d *Daemon) membershipChanged() {
	d.mu.Lock()
	f := d.feed
	d.mu.Unlock()
	if f != nil {
		f.trigger()
	}
}

func (f *feed) trigger() {
	select {
	case f.kick <- struct{}{}:
	default: // one is pending already
	}
}

// run reconciles the feed now, then at each interval and after each trigger, until ctx ends.
func (f *feed) run(ctx context.Context) {
	interval := f.cfg.Interval
	if interval <= 0 {
		interval = feedInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		began := time.Now()
		f.reconcile(ctx)
		// A storm of connections brings reconciles forward back to back, each listing every
		// connection that reads a channel: a trigger waits twice as long as the last reconcile
		// took (never past the interval), so the feed, display only, keeps to a third of the time
		// however many there are. The interval counts from the end of a reconcile, so a tick
		// that came during one does not start the next at once.
		settleFor := min(max(feedSettle, 2*time.Since(began)), interval)
		tick.Reset(interval)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-f.kick:
			settle := time.NewTimer(settleFor)
			select {
			case <-ctx.Done():
				settle.Stop()
				return
			case <-settle.C:
			}
			select { // the triggers that came while settling are served by this reconcile
			case <-f.kick:
			default:
			}
		}
	}
}

// reconcile brings the feed in line with the broker's connections and the open memberships. A
// failure leaves the feed as it was, heartbeat included, so that it reads as stale.
func (f *feed) reconcile(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, feedTimeout)
	defer cancel()
	if err := f.write(ctx); err != nil && ctx.Err() == nil {
		f.d.log.Warn("membership feed not updated (display only; delivery is unaffected)", "err", err)
	}
}

func (f *feed) write(ctx context.Context) error {
	// Only connections subscribing the space's chat subjects can add a row.
	conns, err := connz.Subscribing(ctx, f.cfg.Observer, f.cfg.Account, f.d.cfg.Space.KindAll(wire.KindChat))
	if err != nil {
		return err // a partial view would prune members that are there
	}
	now := wire.MillisOf(time.Now())
	next := membershipRows(f.d.cfg.Space, conns, f.d.openMemberships(), now)
	stored, err := f.stored(ctx)
	if err != nil {
		return err
	}
	b := meshwire.MembershipBucket(f.d.cfg.Space)
	for key, row := range next {
		if cur, ok := stored[key]; ok && cur.SameMembership(row) {
			continue // unchanged: no new revision, no watcher woken
		}
		if err := f.put(ctx, b.Subject(key), row); err != nil {
			return err
		}
	}
	for key := range stored {
		if _, ok := next[key]; !ok {
			if err := f.remove(ctx, b.Subject(key)); err != nil {
				return err
			}
		}
	}
	return f.put(ctx, b.Subject(meshwire.MembershipFeedKey), meshwire.MembershipFeedRow{ObservedAt: now, Count: len(next)})
}

// stored reads the feed's principal rows. A row that does not decode reads as an empty one, to
// be written again.
func (f *feed) stored(ctx context.Context) (map[string]*meshwire.MembershipRow, error) {
	b := meshwire.MembershipBucket(f.d.cfg.Space)
	kv, err := f.js.KeyValue(ctx, string(b))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", b, err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", b, err)
	}
	defer func() { _ = w.Stop() }()
	out := map[string]*meshwire.MembershipRow{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s: %w", b, ctx.Err())
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("read %s: the watch ended", b)
			case e == nil: // every current row is read
				return out, nil
			case e.Key() != meshwire.MembershipFeedKey:
				row := &meshwire.MembershipRow{}
				_ = json.Unmarshal(e.Value(), row)
				out[e.Key()] = row
			}
		}
	}
}

func (f *feed) put(ctx context.Context, subject string, row any) error {
	body, err := json.Marshal(row)
	if err != nil {
		return err
	}
	if _, err := f.js.Publish(ctx, subject, body); err != nil {
		return fmt.Errorf("write %s: %w", subject, err)
	}
	return nil
}

func (f *feed) remove(ctx context.Context, subject string) error {
	msg := nats.NewMsg(subject)
	msg.Header.Set(jsapi.KVOperation, jsapi.KVDelete)
	if _, err := f.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("delete %s: %w", subject, err)
	}
	return nil
}

// openMemberships returns, per member principal, the channels of its open durable memberships:
// activated and not left.
func (d *Daemon) openMemberships() map[string][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]string{}
	for _, r := range d.members {
		if r.Activated && r.LeaveCursor == nil {
			out[r.Owner] = append(out[r.Owner], r.Channel)
		}
	}
	return out
}

// membershipRows derives the feed's rows, keyed by principal dot-form: the live channel patterns
// of each attributable connection, united per principal, and each principal's durable channels.
// A principal with neither has no row.
func membershipRows(sp wire.Space, conns []connz.Conn, durable map[string][]string, now wire.EpochMillis) map[string]*meshwire.MembershipRow {
	live := map[string][]string{}
	for _, c := range conns {
		p, ok := c.Principal()
		if !ok {
			continue // open mode, or infrastructure: nobody's membership
		}
		for _, s := range c.Subscriptions {
			if ch, ok := liveChannel(sp, s); ok {
				live[p.String()] = append(live[p.String()], ch)
			}
		}
	}
	rows := map[string]*meshwire.MembershipRow{}
	for key, chans := range live {
		rows[key] = &meshwire.MembershipRow{Live: sorted(chans), Durable: []string{}, ObservedAt: now}
	}
	for key, chans := range durable {
		if rows[key] == nil {
			rows[key] = &meshwire.MembershipRow{Live: []string{}, ObservedAt: now}
		}
		rows[key].Durable = sorted(chans)
	}
	return rows
}

// liveChannel returns the channel pattern a subscription to sp's chat subjects reads
// ("cotal.<space>.chat.*.*.<channel>" reads <channel>, wildcards kept), and false for any other
// subscription: an inbox, another space, another kind, or a tap too short to name a channel.
func liveChannel(sp wire.Space, subject string) (string, bool) {
	if !strings.HasPrefix(subject, strings.TrimSuffix(sp.KindAll(wire.KindChat), ">")) {
		return "", false
	}
	p, err := wire.ParseSubject(subject)
	if err != nil {
		return "", false
	}
	return p.Rest, true
}

// sorted returns s sorted, without repeats.
func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
