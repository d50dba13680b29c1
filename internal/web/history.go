package web

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/who"
	"github.com/gocotal/cotal/wire"
)

// History reads: the last messages of a stream under a filter, through an ordered consumer of the
// read-only admin credential, oldest first. A message that fails the guard (a forged sender, a
// malformed body) is skipped, as a member would drop it.

// Bounds of one history read.
const (
	// readDeadline bounds one read; what arrived by then is returned.
	readDeadline = 8 * time.Second
	// DefaultLimit and MaxLimit bound ?limit=.
	DefaultLimit = 200
	MaxLimit     = 1000
)

// defaultMaxScan bounds the messages one read walks, whatever limit asks.
const defaultMaxScan = 20000

// maxScan, when set, bounds them instead: a test lowers it while a server's goroutines read.
var maxScan atomic.Uint64

// scanBound is the bound a read walks under.
func scanBound() uint64 {
	if n := maxScan.Load(); n != 0 {
		return n
	}
	return defaultMaxScan
}

// lastEvents returns the last limit guarded messages of stream under filter.
func lastEvents(ctx context.Context, js jetstream.JetStream, stream, filter string, limit int) ([]Event, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	// The read starts maxScan messages before the stream's end, so a long stream yields its
	// latest messages, not its first.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}
	if st, err := js.Stream(ctx, stream); err == nil {
		if last, scan := st.CachedInfo().State.LastSeq, scanBound(); last > scan {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, last-scan+1
		}
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	pending := int(min(info.NumPending, scanBound()))
	ring := make([]Event, 0, limit)
	for read := 0; read < pending; {
		msgs, err := jsapi.Fetch(ctx, cons, min(pending-read, 256), jetstream.FetchMaxWait(time.Second))
		for _, m := range msgs {
			if ev, ok := eventOf(m.Subject(), m.Data()); ok {
				if len(ring) == limit {
					ring = append(ring[:0], ring[1:]...)
				}
				ring = append(ring, ev)
			}
		}
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return ring, err
		}
		if len(msgs) == 0 {
			break // the rest expired or was purged under us
		}
		read += len(msgs)
	}
	return ring, nil
}

// eventOf guards one message and renders it; false for one a member would drop.
func eventOf(subject string, data []byte) (Event, bool) {
	d, err := wire.Guard(subject, data)
	if err != nil {
		return Event{}, false
	}
	ev := Event{Mode: d.Kind, SenderID: d.Sender.String(), Who: who.Is(d.Message.From.Name, d.Sender.String()), Msg: d.Message, HTML: Render(d.Message)}
	if d.Kind == wire.DeliveryChannel {
		ev.Channel = d.Subject.Rest
	} else {
		ev.To = d.Subject.Rest
	}
	return ev, true
}
