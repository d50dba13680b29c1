package warden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/kvget"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/wire"
)

// judge returns why a message stored on one of the space's message streams is not what any
// legitimate writer stores there, or nil.
type judge func(subject string, body []byte) error

// messageStreams returns the space's message streams and how each one's messages are judged.
// Channel posts, direct messages and tasks are judged by the receive guard every reader applies:
// what it refuses no reader surfaces. The delivery daemon's inbox entries and hand-offs and the
// run journals are judged only by their shape as a reply subject can make them: their writers are
// the mesh's and a newer writer's fields must not be taken for an attack.
func messageStreams(s wire.Space) map[string]judge {
	guard := func(subject string, body []byte) error {
		_, err := wire.Guard(subject, body)
		return err
	}
	reply := func(_ string, body []byte) error { return jetStreamReply(body) }
	return map[string]judge{
		s.ChatStream():             guard,
		s.DMStream():               guard,
		s.TaskStream():             guard,
		meshwire.InboxStream(s):    reply,
		s.DLVStream():              reply,
		meshwire.WFJStream(s):      reply,
		meshwire.ContractStream(s): reply,
		meshwire.EventStream(s):    reply,
		meshwire.FactStream(s):     reply,
		// The control surface's streams: no writer of them runs here yet, and a reply aimed at
		// one is a capture like any other.
		meshwire.SubmissionStream(s):   reply,
		meshwire.TimerRequestStream(s): reply,
		meshwire.TimerStream(s):        reply,
		meshwire.RecordWriteStream(s):  reply,
		meshwire.WorkStream(s):         reply,
	}
}

// undeletable reports whether stream refuses message deletes whoever asks (the contract stream,
// SPEC §13.12): a capture stored there is logged and its sender revoked, and its readers, which
// check every artifact against its digest, leave it inert.
func undeletable(s wire.Space, stream string) bool { return stream == meshwire.ContractStream(s) }

// ackFields are the fields of a JetStream publish acknowledgement, its error form included.
var ackFields = []string{"stream", "seq", "domain", "duplicate", "val", "batch", "count", "error"}

// jetStreamReply returns an error when body has the shape only a JetStream reply aimed through a
// reply subject has: empty (a status message), not a JSON object, a publish acknowledgement, or
// an API response. Every row and record a space stores is a non-empty JSON object of its own.
func jetStreamReply(body []byte) error {
	if len(body) == 0 {
		return errors.New("an empty body: a JetStream status reply")
	}
	var typ []byte
	var stream, failed, other bool
	object := objectFields(body, func(key string, value []byte) {
		switch key {
		case "type":
			typ = value // the last of duplicate keys counts, as when decoding
		case "stream":
			stream = true
		case "error":
			failed = true
		}
		if !slices.Contains(ackFields, key) {
			other = true
		}
	})
	if !object {
		return errors.New("not a JSON object")
	}
	var t string
	if typ != nil && json.Unmarshal(typ, &t) == nil && strings.HasPrefix(t, "io.nats.jetstream.") {
		return fmt.Errorf("a JetStream API response (%s)", t)
	}
	if (!stream && !failed) || other {
		return nil
	}
	return errors.New("a JetStream publish acknowledgement")
}

// guardStreams reads every message stored on the space's message streams from now on and
// quarantines each one its stream's judge refuses, with every copy of it.
func (w *Warden) guardStreams(ctx context.Context) error {
	var started []jetstream.ConsumeContext
	var scans sync.WaitGroup
	scanCtx, stopScans := context.WithCancel(ctx)
	defer func() {
		for _, cc := range started {
			cc.Stop()
		}
		stopScans() // a failed start returns before ctx ends: the scans must not outlive it
		scans.Wait()
	}()
	for stream, judge := range messageStreams(w.cfg.Space) {
		if stream == w.cfg.Space.TaskStream() || stream == meshwire.WorkStream(w.cfg.Space) {
			// A work queue takes no consumer that overlaps the role durables or the pools, so
			// its new messages are read by sequence instead.
			scans.Go(func() { w.scanWorkQueue(scanCtx, stream, judge) })
			continue
		}
		cons, err := w.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			return fmt.Errorf("watch %s: %w", stream, err)
		}
		cc, err := w.consume(stream, cons, func(msg jetstream.Msg) { w.judgeMessage(ctx, stream, judge, msg) })
		if err != nil {
			return fmt.Errorf("watch %s: %w", stream, err)
		}
		started = append(started, cc)
	}
	w.watching()
	<-ctx.Done()
	return nil
}

// workQueueScan is how often a work-queue stream is scanned for messages stored since the last
// scan.
const workQueueScan = 200 * time.Millisecond

// scanWorkQueue judges, until ctx ends, every message stored on a work-queue stream after the
// scan started, reading each by sequence. A message its workers took before the scan reached it
// is gone and skipped: its worker's receive guard judged it.
func (w *Warden) scanWorkQueue(ctx context.Context, stream string, judge judge) {
	var next uint64
	t := time.NewTicker(workQueueScan)
	defer t.Stop()
	for {
		st, err := w.stream(ctx, stream)
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = st.Info(ctx); err == nil {
				if next == 0 {
					next = info.State.LastSeq + 1
				}
				for ; next <= info.State.LastSeq && ctx.Err() == nil; next++ {
					raw, err := kvget.ReadSeq(ctx, w.nc, stream, next)
					if err != nil {
						continue // kvget.ErrNotFound: taken by a worker, or deleted
					}
					w.judgeStored(ctx, stream, judge, raw.Subject, raw.Data, next)
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			w.log.Warn("scan a work queue", "stream", stream, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// judgeMessage judges one stored message: a refused one is deleted.
func (w *Warden) judgeMessage(ctx context.Context, stream string, judge judge, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	w.judgeStored(ctx, stream, judge, msg.Subject(), msg.Data(), meta.Sequence.Stream)
}

// judgeStored judges the message stored at seq on stream.
func (w *Warden) judgeStored(ctx context.Context, stream string, judge judge, subject string, body []byte, seq uint64) {
	here := location{stream: stream, seq: seq}
	if err := w.ownSubject(ctx, stream, subject); err != nil {
		// A consumer delivery keeps its message's own subject: a copy whose reply or deliver
		// subject a stream captured is stored there under a subject the stream does not take.
		w.quarantine(ctx, here, subject, err.Error(), culprit{kind: "consumer-delivery", text: "a JetStream consumer delivery aimed at this stream"})
		return
	}
	err := judge(subject, body)
	if err == nil {
		w.holdUnserved(ctx, stream, subject, len(body), seq)
		return
	}
	c := w.culpritOf(ctx, subject, body)
	if undeletable(w.cfg.Space, stream) {
		w.limited("capture kept "+stream+" "+c.kind, slog.LevelWarn, "capture stored where the broker refuses deletes",
			"stream", stream, "seq", seq, "subject", subject, "reason", err.Error(), "cause", c.text)
	} else if w.quarantine(ctx, here, subject, err.Error(), c) {
		w.notify(ctx, here, subject, body, err)
	}
	w.punish(ctx, c, "aimed a JetStream reply at "+stream)
}

// location is one stored message: its stream and sequence.
type location struct {
	stream string
	seq    uint64
}

// quarantine deletes one stored message by sequence and logs why and what caused it, one line a
// second per stream and kind of cause. It reports whether the message is gone.
func (w *Warden) quarantine(ctx context.Context, at location, subject, why string, c culprit) bool {
	w.deleted.add(at, subject)
	err := w.deleteMsg(ctx, at.stream, at.seq)
	attrs := []any{"stream", at.stream, "seq", at.seq, "subject", subject, "reason", why, "cause", c.text}
	key := "quarantine " + at.stream + " " + c.kind
	if err != nil {
		w.limited(key+" failed", slog.LevelError, "quarantine a stored message", append(attrs, "err", err)...)
		return false
	}
	metrics.WardenQuarantines.WithLabelValues(at.stream, c.kind).Inc()
	w.limited(key, slog.LevelWarn, "stored message quarantined", attrs...)
	return true
}

// ownSubject returns an error when subject is none of stream's configured subjects.
func (w *Warden) ownSubject(ctx context.Context, stream, subject string) error {
	st, err := w.stream(ctx, stream)
	if err != nil {
		return nil // judged on its body alone
	}
	for _, f := range st.CachedInfo().Config.Subjects {
		if wire.SubjectMatches(f, subject) {
			return nil
		}
	}
	return fmt.Errorf("%s is not a subject of %s", subject, stream)
}

// stream returns a handle on a stream of the space, looked up once.
func (w *Warden) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	w.streamsMu.Lock()
	defer w.streamsMu.Unlock()
	if st, ok := w.streams[name]; ok {
		return st, nil
	}
	st, err := w.js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	w.streams[name] = st
	return st, nil
}

// deleteMsg deletes the message at seq of stream; one already gone is no error.
func (w *Warden) deleteMsg(ctx context.Context, stream string, seq uint64) error {
	return retrying(ctx, func() error { return jsapi.DeleteMsg(ctx, w.nc, stream, seq) })
}

// repairAttempts bounds how often a repair is tried: a JetStream API request can find no
// responder, or go unanswered, while the broker applies an account update (every revocation
// pushes one), and a capture left in place is what the repair is for. The waits between
// attempts double from 100 ms (1.5 s in all).
const repairAttempts = 5

// retrying runs op until it succeeds or fails with a conflict (the row moved on: nothing left to
// repair), at most repairAttempts times while ctx lasts, and returns its last error.
func retrying(ctx context.Context, op func() error) error {
	var err error
	for attempt := range repairAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
			}
		}
		if err = op(); err == nil || jsapi.Conflict(err) {
			return err
		}
	}
	return err
}

// streamHandles caches stream handles; embedded in Warden.
type streamHandles struct {
	streamsMu sync.Mutex
	streams   map[string]jetstream.Stream // guarded by streamsMu
}
