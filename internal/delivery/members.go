package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The active daemon is the only writer of membership rows, so it keeps them in memory, loaded
// when its term begins and updated by its own writes.

// loadMembers reads every membership row of the space.
func (d *Daemon) loadMembers(ctx context.Context) error {
	b := meshwire.MembersBucket(d.cfg.Space)
	kv, err := d.js.KeyValue(ctx, string(b))
	if err != nil {
		return fmt.Errorf("open %s: %w", b, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("list %s: %w", b, err)
	}
	members, revs := map[string]*meshwire.MemberRow{}, map[string]uint64{}
	for key := range keys.Keys() {
		row, e, err := getRow(ctx, d, b, key, meshwire.DecodeMemberRow)
		if err != nil {
			d.log.Warn("membership row skipped", "key", key, "err", err)
			continue
		}
		if e != nil {
			members[key], revs[key] = row, e.Revision
		}
	}
	_ = keys.Stop() // the listing is complete; stopping only releases the watcher
	d.mu.Lock()
	d.members, d.revs = members, revs
	d.mu.Unlock()
	return nil
}

// member returns a copy of the row of l's membership of channel, or nil.
func (d *Daemon) member(channel string, l wire.Lifecycle) *meshwire.MemberRow {
	key, err := meshwire.MemberKey(channel, l)
	if err != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.members[key]; r != nil {
		c := *r
		return &c
	}
	return nil
}

// membersOf returns copies of every membership row of channel.
func (d *Daemon) membersOf(channel string) []meshwire.MemberRow {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []meshwire.MemberRow
	for _, r := range d.members {
		if r.Channel == channel {
			out = append(out, *r)
		}
	}
	return out
}

// writeMember stores row with a compare-and-set on the revision this daemon last saw.
func (d *Daemon) writeMember(ctx context.Context, row *meshwire.MemberRow) error {
	p, err := wire.ParsePrincipal(row.Owner)
	if err != nil {
		return err
	}
	key, err := meshwire.MemberKey(row.Channel, wire.Lifecycle{Principal: p, UID: row.LifecycleUID})
	if err != nil {
		return err
	}
	row.WriterIdentity, row.UpdatedAt = d.cfg.Holder, wire.MillisOf(time.Now())
	value, err := json.Marshal(row)
	if err != nil {
		return err
	}
	d.mu.Lock()
	rev, cached := d.revs[key], d.members[key]
	d.mu.Unlock()
	b := meshwire.MembersBucket(d.cfg.Space)
	next, err := d.put(ctx, b, key, value, rev)
	if err != nil && rev != 0 && cached != nil && wrongRevision(err) {
		// The row this daemon last wrote, stored again at a new revision by a repair.
		same := func(r *meshwire.MemberRow) bool { return reflect.DeepEqual(r, cached) }
		if cur := rewrittenAs(ctx, d, b, key, meshwire.DecodeMemberRow, same); cur != 0 {
			next, err = d.put(ctx, b, key, value, cur)
		}
	}
	if err != nil {
		return err
	}
	c := *row
	d.mu.Lock()
	d.members[key], d.revs[key] = &c, next
	d.mu.Unlock()
	d.membershipChanged()
	return nil
}

// chatFrontier is the CHAT stream's last sequence: the join and leave cursor.
func (d *Daemon) chatFrontier(ctx context.Context) (uint64, error) {
	st, err := d.js.Stream(ctx, d.cfg.Space.ChatStream())
	if err != nil {
		return 0, fmt.Errorf("read the CHAT frontier: %w", err)
	}
	return st.CachedInfo().State.LastSeq, nil
}

// fanoutPosition is how far the fan-out consumer has delivered in CHAT.
func (d *Daemon) fanoutPosition(ctx context.Context) (uint64, error) {
	c, err := d.js.Consumer(ctx, d.cfg.Space.ChatStream(), meshwire.FanoutDurable)
	if err != nil {
		return 0, fmt.Errorf("read the fan-out position: %w", err)
	}
	return c.CachedInfo().Delivered.Stream, nil
}
