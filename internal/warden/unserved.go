package warden

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gocotal/cotal/wire"
)

// Mail no consumer takes: a direct message to a principal that has no dm_ durable (no lifecycle
// of it was ever provisioned, or its last one was retired) and a task for a role no svc_ durable
// serves stay stored, and the streams that keep them have no byte or age limit (the reference's
// configs, which a client must find unchanged). The warden bounds what waits for each such
// recipient or role: past DefaultUnservedBytes or DefaultUnservedMessages a new message is
// deleted as it is stored (the waiting ones stay, as a mailbox that is full refuses more), and a
// message that has waited DefaultUnservedAge is deleted. All such mail together is held to
// DefaultUnservedTotalBytes, so many made-up recipients do not add up to an unbounded store. The
// bounds count from the warden's start: it does not reread what was stored before.
const (
	DefaultUnservedBytes      = 16 << 20
	DefaultUnservedMessages   = 1000
	DefaultUnservedAge        = 7 * 24 * time.Hour
	DefaultUnservedTotalBytes = 256 << 20
)

// servedRefresh is how often the warden lists a stream's consumers again, and servedRecheck the
// shortest time between two listings forced by a message to a recipient not yet known served.
const (
	servedRefresh = 5 * time.Second
	servedRecheck = time.Second
	unservedSweep = time.Minute
)

// unservedMail tracks what waits, per stream and filter, for a consumer that does not exist. It is
// safe for concurrent use.
type unservedMail struct {
	mu     sync.Mutex
	served map[string]map[string]bool // guarded by mu: stream -> consumer filters
	listed map[string]time.Time       // guarded by mu: stream -> when its consumers were listed
	boxes  map[string]*mailbox        // guarded by mu: stream + " " + filter
	total  int64                      // guarded by mu: the bytes every box holds
}

type mailbox struct {
	stream  string
	filter  string
	bytes   int64
	waiting []waitingMsg
}

type waitingMsg struct {
	seq  uint64
	size int64
	at   time.Time
}

// unservedFilter returns the filter of the consumer that would take a message stored under
// subject on stream: a dm_ durable's for a direct message, a svc_ durable's for a task; "" for a
// stream whose messages the bounds do not cover.
func unservedFilter(sp wire.Space, stream, subject string) string {
	tokens := strings.Split(subject, ".")
	switch {
	case stream == sp.DMStream() && len(tokens) == 7:
		return strings.Join(tokens[:5], ".") + ".>"
	case stream == sp.TaskStream() && len(tokens) == 6:
		return strings.Join(tokens[:4], ".") + ".>"
	}
	return ""
}

// holdUnserved counts a message stored at seq under subject on stream against its recipient's
// bound when no consumer takes it, and deletes it when it is over.
func (w *Warden) holdUnserved(ctx context.Context, stream, subject string, size int, seq uint64) {
	filter := unservedFilter(w.cfg.Space, stream, subject)
	if filter == "" || w.isServed(ctx, stream, filter) {
		return
	}
	admitted, waiting, bytes := w.unserved.admit(stream, filter, seq, int64(size), unservedBounds{
		perBytes: w.cfg.UnservedBytes, perMessages: w.cfg.UnservedMessages, totalBytes: w.cfg.UnservedTotalBytes})
	if admitted {
		return
	}
	err := w.deleteMsg(ctx, stream, seq)
	attrs := []any{"stream", stream, "seq", seq, "subject", subject, "for", filter, "waiting", waiting, "bytes", bytes}
	if err != nil {
		w.limited("unserved "+stream+" failed", slog.LevelError, "delete mail no consumer takes", append(attrs, "err", err)...)
		return
	}
	w.limited("unserved "+stream, slog.LevelWarn, "mail no consumer takes refused over its bound", attrs...)
}

// unservedBounds are the warden's bounds on mail no consumer takes.
type unservedBounds struct {
	perBytes    int64
	perMessages int
	totalBytes  int64
}

// admit counts a message of size stored at seq on stream for filter's mailbox when it fits the
// bounds, and reports whether it did, with how many messages and bytes the mailbox then holds.
func (u *unservedMail) admit(stream, filter string, seq uint64, size int64, b unservedBounds) (bool, int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.boxes == nil {
		u.boxes = map[string]*mailbox{}
	}
	key := stream + " " + filter
	box := u.boxes[key]
	if box == nil {
		box = &mailbox{stream: stream, filter: filter}
		u.boxes[key] = box
	}
	if box.bytes+size > b.perBytes || len(box.waiting)+1 > b.perMessages || u.total+size > b.totalBytes {
		return false, len(box.waiting), box.bytes
	}
	box.bytes += size
	u.total += size
	box.waiting = append(box.waiting, waitingMsg{seq: seq, size: size, at: time.Now()})
	return true, len(box.waiting), box.bytes
}

// isServed reports whether a consumer of stream filters exactly filter, listing the stream's
// consumers again when the list is old, or when filter is not in it and the list is not fresh.
func (w *Warden) isServed(ctx context.Context, stream, filter string) bool {
	u := &w.unserved
	u.mu.Lock()
	served, age := u.served[stream][filter], time.Since(u.listed[stream])
	u.mu.Unlock()
	if age < servedRecheck || (served && age < servedRefresh) {
		return served
	}
	filters, err := w.consumerFilters(ctx, stream)
	if err != nil {
		return true // unknown: leave the message be
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.served == nil {
		u.served, u.listed = map[string]map[string]bool{}, map[string]time.Time{}
	}
	u.served[stream], u.listed[stream] = filters, time.Now()
	for key, box := range u.boxes {
		if box.stream == stream && filters[box.filter] {
			u.total -= box.bytes
			delete(u.boxes, key) // a consumer takes it now: its mail is delivered, not bounded
		}
	}
	return filters[filter]
}

// consumerFilters lists the filters of stream's consumers.
func (w *Warden) consumerFilters(ctx context.Context, stream string) (map[string]bool, error) {
	st, err := w.stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		if f := info.Config.FilterSubject; f != "" {
			out[f] = true
		}
		for _, f := range info.Config.FilterSubjects {
			out[f] = true
		}
	}
	return out, lister.Err()
}

// sweepUnserved deletes, every unservedSweep until ctx ends, the mail that has waited past its
// age for a consumer that still does not exist.
func (w *Warden) sweepUnserved(ctx context.Context) {
	t := time.NewTicker(unservedSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var expired []waitingMsg
		var from []string
		u := &w.unserved
		u.mu.Lock()
		for _, box := range u.boxes {
			n := 0
			for n < len(box.waiting) && time.Since(box.waiting[n].at) > w.cfg.UnservedAge {
				box.bytes -= box.waiting[n].size
				u.total -= box.waiting[n].size
				expired = append(expired, box.waiting[n])
				from = append(from, box.stream)
				n++
			}
			box.waiting = box.waiting[n:]
		}
		u.mu.Unlock()
		for i, m := range expired {
			if err := w.deleteMsg(ctx, from[i], m.seq); err != nil {
				w.limited("unserved expiry "+from[i], slog.LevelWarn, "expire mail no consumer took", "stream", from[i], "seq", m.seq, "err", err)
			}
		}
	}
}
