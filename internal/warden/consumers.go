package warden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/connz"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// The consumer audit.
//
// Attribution. The broker announces every JetStream API call of the space's account on
// jsapi.AuditAdvisory, with the calling client as the broker knows it: "user" is the
// credential's user public key, "name_tag" the user JWT's name and "tags" its tags. The authority
// signs the profile as the JWT's name and the principal as its "principal:" tag, and the broker
// copies both from the JWT it verified, never from what the client says (unlike "name", the
// client's own connect option). So the audit learns each creator's key, profile and principal
// from the advisory itself: no ledger round trip, however fast a flood comes, and nothing to
// cache. A successful CONSUMER.CREATE or CONSUMER.DURABLE.CREATE names the consumer's stream,
// name and final config in its response; the consumer is attributed to the creator's user key.
// An update of an existing consumer is a create too: it is judged, but the consumer keeps its
// first creator. Consumers created before the warden started are nobody's.
//
// Who is judged. Only the profiles handed to processes outside the mesh (judged). The mesh's own
// daemons and tools (delivery, provisioner, supervisor, ledger, warden, ...) hold consumers by
// design: the provisioner alone creates two durables per agent.
//
// The rules. A push consumer whose deliver subject is not inside its creator's own inbox
// (_INBOX_<connId>., the connId being the user key, as authority mints it) is deleted at once:
// JetStream publishes its stored messages there from its own client, unchecked against the
// creator's grant (nats-server#8274), and a stream or bucket of the space that captures the
// subject stores them, under their source subject, where the creator could never write. (The
// broker starts delivering once any client subscribes the deliver subject literally; the
// creator itself can, for a subject its read grant covers.) A credential holding more than the
// quota of live consumers is an offender too. An offender's
// credential is revoked (Config.Revoke), and every consumer attributed to it is deleted, those it
// holds and any it creates before the broker has closed its connections: a revoked credential
// has no legitimate reader left, and its durables would otherwise hold the account's consumer
// slots for good.
//
// Counting. A consumer leaves the count when the broker announces its deletion
// (jsapi.ConsumerDeletedAdvs: by request, or when its inactive threshold passed).
// Advisories are at-most-once and the two subjects are not ordered against each other, so a
// count can only drift upwards; before judging a credential over quota the audit lists the
// streams its consumers are on and forgets what is gone, and it reconciles every attribution the
// same way every reconcileEvery.

// DefaultConsumerQuota is how many consumers one credential may hold on a space's streams at
// once. An SDK agent holds three to ten (its roster and registry watches, a history read per
// joining channel), and an agent whose link flaps leaves the watch consumers of its old
// connections behind until their inactive thresholds pass. 128 leaves that more than tenfold
// headroom, while one credential can fill at most an eighth of a 1,000-consumer account limit:
// a flood is judged at its 129th consumer.
const DefaultConsumerQuota = 128

// judged lists the profiles whose consumers the warden judges: those handed to agents, humans
// and remote callers. A run operator may create one replay durable, whose config it still
// chooses; session halves create none today.
var judged = []authority.Profile{
	authority.ProfileAgent, authority.ProfileObserver, authority.ProfileAdmin, authority.ProfileOperator,
	authority.ProfileRunOperator, authority.ProfileSessionCaller, authority.ProfileSessionServing,
}

const (
	// reconcileEvery is how often every attribution is checked against the streams' consumers.
	reconcileEvery = time.Minute
	// flushWait bounds the broker's confirmation of the audit's subscriptions.
	flushWait = 10 * time.Second
	// listWait bounds one stream's consumer listing.
	listWait = 10 * time.Second
	// deleteWait bounds one consumer delete request; deleteAttempts and deleteBackoff (doubled
	// after each failure) space the retries of one over about three seconds.
	deleteWait     = 5 * time.Second
	deleteAttempts = 6
	deleteBackoff  = 100 * time.Millisecond
	// revokeWait bounds one revocation: the ledger, the broker's claims update, the eviction.
	revokeWait = 30 * time.Second
	// deleters is how many consumer deletes run at once: an offender's hundreds go in well under
	// a second without a burst of thousands of requests.
	deleters = 8
	// eventBuffer and the subscriptions' pending limits absorb a flood while the loop deletes
	// synchronously or lists a stream, so the client library drops no advisory (the reconcile
	// logs any it did); deleteBacklog queues an offender's consumers for the deleters.
	eventBuffer   = 4096
	pendingMsgs   = 1 << 18
	pendingBytes  = 256 << 20
	deleteBacklog = 4096
)

// consumerRef names one consumer of the account.
type consumerRef struct{ stream, name string }

// holder is one judged credential and the consumers attributed to it.
type holder struct {
	key       string
	principal string
	profile   authority.Profile
	consumers map[consumerRef]struct{}
	// offender is set once the credential broke a rule: from then on every consumer attributed
	// to it is deleted on sight.
	offender bool
}

// audit is the state of one auditConsumers run. Everything but deletes and the errgroup is owned
// by the loop goroutine.
type audit struct {
	w       *Warden
	g       *errgroup.Group
	holders map[string]*holder      // by user key
	owners  map[consumerRef]*holder // consumers attributed to a judged credential
	deletes chan consumerRef
}

// auditConsumers judges every consumer a judged credential creates, as the comment at the top of
// this file describes, until ctx ends. It fails only when it cannot subscribe.
func (w *Warden) auditConsumers(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	a := &audit{
		w: w, g: g,
		holders: map[string]*holder{},
		owners:  map[consumerRef]*holder{},
		deletes: make(chan consumerRef, deleteBacklog),
	}
	events := make(chan *nats.Msg, eventBuffer)
	forward := func(m *nats.Msg) {
		select {
		case events <- m:
		case <-gctx.Done():
		}
	}
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe() // the connection may be closing with the mesh; nothing to undo
		}
	}()
	for _, subject := range []string{jsapi.AuditAdvisory, jsapi.ConsumerDeletedAdvs} {
		s, err := w.nc.Subscribe(subject, forward)
		if err != nil {
			return fmt.Errorf("warden: subscribe %s: %w", subject, err)
		}
		if err := s.SetPendingLimits(pendingMsgs, pendingBytes); err != nil {
			return fmt.Errorf("warden: pending limits of %s: %w", subject, err)
		}
		subs = append(subs, s)
	}
	fctx, cancel := context.WithTimeout(ctx, flushWait)
	defer cancel()
	if err := w.nc.FlushWithContext(fctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("warden: confirm the audit subscriptions: %w", err)
	}
	w.watching()

	for range deleters {
		g.Go(func() error { a.deleter(gctx); return nil })
	}
	g.Go(func() error { a.loop(gctx, events, subs); return nil })
	return g.Wait()
}

// loop handles the advisories in arrival order and reconciles the counts periodically.
func (a *audit) loop(ctx context.Context, events <-chan *nats.Msg, subs []*nats.Subscription) {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	var dropped int
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-events:
			// A consumer delivery keeps its own subject and carries a $JS.ACK reply, so an
			// advisory is taken only from the broker: its exact subject and no reply.
			switch {
			case m.Reply != "":
			case m.Subject == jsapi.AuditAdvisory:
				a.onAPI(ctx, m.Data)
			case strings.HasPrefix(m.Subject, consumerDeletedPrefix):
				a.onDeleted(m.Subject, m.Data)
			}
		case <-t.C:
			a.reconcile(ctx)
			n := 0
			for _, s := range subs {
				d, _ := s.Dropped() // fails only on a closed subscription, which counts nothing
				n += d
			}
			if n > dropped {
				a.w.log.Error("consumer audit dropped advisories", "dropped", n-dropped)
				dropped = n
			}
		}
	}
}

// apiAudit is what the audit reads of the broker's io.nats.jetstream.advisory.v1.api_audit.
type apiAudit struct {
	Type   string `json:"type"`
	Client *struct {
		User    string   `json:"user"`
		NameTag string   `json:"name_tag"`
		Tags    []string `json:"tags"`
	} `json:"client"`
	Subject  string `json:"subject"`
	Response string `json:"response"`
}

// createResponse is what the audit reads of a consumer create's response.
type createResponse struct {
	Error  *json.RawMessage `json:"error"`
	Stream string           `json:"stream_name"`
	Name   string           `json:"name"`
	Config *struct {
		DeliverSubject string `json:"deliver_subject"`
	} `json:"config"`
}

// consumerAction is what the audit reads of io.nats.jetstream.advisory.v1.consumer_action.
type consumerAction struct {
	Type     string `json:"type"`
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
}

// onAPI judges one API audit advisory: a successful consumer create by a judged credential.
func (a *audit) onAPI(ctx context.Context, data []byte) {
	// Most of the account's API calls are not consumer creates; skip them before decoding.
	if !bytes.Contains(data, []byte("CONSUMER.")) {
		return
	}
	var adv apiAudit
	if json.Unmarshal(data, &adv) != nil || adv.Type != apiAuditType || adv.Client == nil || adv.Client.User == "" {
		return
	}
	if !strings.HasPrefix(adv.Subject, jsapi.ConsumerCreate) && !strings.HasPrefix(adv.Subject, jsapi.ConsumerDurable) {
		return
	}
	profile := authority.Profile(adv.Client.NameTag)
	if !slices.Contains(judged, profile) {
		return
	}
	var res createResponse
	if json.Unmarshal([]byte(adv.Response), &res) != nil || res.Error != nil || res.Stream == "" || res.Name == "" {
		return
	}
	key := adv.Client.User
	h := a.holders[key]
	if h == nil {
		h = &holder{key: key, principal: principalOf(adv.Client.Tags), profile: profile, consumers: map[consumerRef]struct{}{}}
		a.holders[key] = h
	}
	ref := consumerRef{res.Stream, res.Name}

	if res.Config != nil && res.Config.DeliverSubject != "" {
		inbox := wire.ConnID(key).InboxPrefix() + "."
		if ds := res.Config.DeliverSubject; !strings.HasPrefix(ds, inbox) {
			// Queued before anything else, to cut short what JetStream delivers there; the
			// deleters retry, so a slow API does not stall the audit.
			a.enqueue(ctx, ref)
			if h.offender {
				return // judged already; its credential is being revoked
			}
			a.w.log.Warn("consumer delivers outside its creator's inbox",
				"principal", h.principal, "user_key", key, "profile", string(profile),
				"stream", ref.stream, "consumer", ref.name, "deliver_subject", ds)
			a.offend(ctx, h, fmt.Sprintf("warden: consumer %s on %s delivered to %s, outside the credential's inbox %s>", ref.name, ref.stream, ds, inbox))
			return
		}
	}

	if owner := a.owners[ref]; owner != nil {
		if owner.offender {
			a.enqueue(ctx, ref)
		}
		return // an update, or a create that found the consumer already there
	}
	a.owners[ref] = h
	h.consumers[ref] = struct{}{}
	if h.offender {
		a.enqueue(ctx, ref)
		return
	}
	if len(h.consumers) <= a.w.cfg.ConsumerQuota {
		return
	}
	if err := a.verify(ctx, h); err != nil {
		// Judged on the advisories alone: a count can only be too high when a deletion advisory
		// was lost, and a credential must not escape its quota by making the listing fail.
		a.w.log.Error("list consumers", "user_key", key, "err", err)
	}
	if n := len(h.consumers); n > a.w.cfg.ConsumerQuota {
		a.w.log.Warn("consumer quota exceeded",
			"principal", h.principal, "user_key", key, "profile", string(profile),
			"consumers", n, "quota", a.w.cfg.ConsumerQuota)
		a.offend(ctx, h, fmt.Sprintf("warden: held %d consumers on the space's streams, over the quota of %d", n, a.w.cfg.ConsumerQuota))
	}
}

// consumerDeletedPrefix starts the subject of a consumer-deleted advisory, which goes on
// "<stream>.<consumer>".
var consumerDeletedPrefix = strings.TrimSuffix(jsapi.ConsumerDeletedAdvs, ">")

// apiAuditType is the type of the broker's API audit advisories.
const apiAuditType = "io.nats.jetstream.advisory.v1.api_audit"

// consumerActionType is the type of the broker's consumer action advisories.
const consumerActionType = "io.nats.jetstream.advisory.v1.consumer_action"

// onDeleted forgets a consumer the broker announces deleted on subject; an advisory whose body
// does not name the consumer its subject names is not the broker's and is ignored.
func (a *audit) onDeleted(subject string, data []byte) {
	var adv consumerAction
	if json.Unmarshal(data, &adv) != nil || adv.Type != consumerActionType ||
		subject != consumerDeletedPrefix+adv.Stream+"."+adv.Consumer {
		return
	}
	a.forget(consumerRef{adv.Stream, adv.Consumer})
}

// forget drops a consumer's attribution, and its holder once it holds none and is no offender.
func (a *audit) forget(ref consumerRef) {
	h := a.owners[ref]
	if h == nil {
		return
	}
	delete(a.owners, ref)
	delete(h.consumers, ref)
	if len(h.consumers) == 0 && !h.offender {
		delete(a.holders, h.key)
	}
}

// offend marks h an offender: every consumer attributed to it is queued for deletion, and its
// credential is revoked in the background while the loop goes on deleting what it still creates.
func (a *audit) offend(ctx context.Context, h *holder, reason string) {
	if h.offender {
		return
	}
	h.offender = true
	for ref := range h.consumers {
		a.enqueue(ctx, ref)
	}
	if a.w.cfg.Revoke == nil {
		return
	}
	key, principal := h.key, h.principal
	a.g.Go(func() error {
		rctx, cancel := context.WithTimeout(ctx, revokeWait)
		defer cancel()
		p, err := a.w.cfg.Revoke(rctx, key, reason)
		if p == "" {
			p = principal
		}
		if err != nil {
			if ctx.Err() == nil {
				a.w.log.Error("revoke credential", "principal", p, "user_key", key, "reason", reason, "err", err)
			}
			return nil
		}
		a.w.log.Warn("credential revoked", "principal", p, "user_key", key, "reason", reason)
		return nil
	})
}

// enqueue hands a consumer to the deleters; it blocks while they are behind, which holds the
// advisories in the subscriptions' pending buffers.
func (a *audit) enqueue(ctx context.Context, ref consumerRef) {
	select {
	case a.deletes <- ref:
	case <-ctx.Done():
	}
}

// deleter deletes queued consumers until ctx ends.
func (a *audit) deleter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ref := <-a.deletes:
			a.delete(ctx, ref)
		}
	}
}

// delete deletes one consumer; one already gone is no error. Under a flood the broker sheds API
// requests (it answers "no responders"), so a failed delete is retried, backing off; one that
// still fails stays attributed, and the next reconcile queues it again. Its deletion advisory,
// not this call, drops its attribution.
func (a *audit) delete(ctx context.Context, ref consumerRef) {
	backoff := deleteBackoff
	for attempt := 1; ; attempt++ {
		dctx, cancel := context.WithTimeout(ctx, deleteWait)
		err := a.w.js.DeleteConsumer(dctx, ref.stream, ref.name)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || ctx.Err() != nil {
			return
		}
		if attempt == deleteAttempts {
			a.w.log.Error("delete consumer", "stream", ref.stream, "consumer", ref.name, "attempts", attempt, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// verify forgets h's consumers that no longer exist, listing the streams they are on.
func (a *audit) verify(ctx context.Context, h *holder) error {
	streams := map[string]bool{}
	for ref := range h.consumers {
		streams[ref.stream] = true
	}
	return a.prune(ctx, streams, h.consumers)
}

// reconcile forgets every attributed consumer that no longer exists, and queues again for
// deletion every consumer an offender still holds.
func (a *audit) reconcile(ctx context.Context) {
	streams := map[string]bool{}
	attributed := make(map[consumerRef]struct{}, len(a.owners))
	for ref := range a.owners {
		streams[ref.stream] = true
		attributed[ref] = struct{}{}
	}
	if err := a.prune(ctx, streams, attributed); err != nil && ctx.Err() == nil {
		a.w.log.Error("reconcile consumers", "err", err)
	}
	// What an offender still holds is what its deletes failed to remove.
	for _, h := range a.holders {
		if h.offender {
			for ref := range h.consumers {
				a.enqueue(ctx, ref)
			}
		}
	}
}

// prune lists each of streams and forgets the consumers of refs on it that it does not list. A
// stream that fails to list keeps its attributions; the others are still pruned.
func (a *audit) prune(ctx context.Context, streams map[string]bool, refs map[consumerRef]struct{}) error {
	var errs []error
	for st := range streams {
		live, err := a.live(ctx, st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for ref := range refs {
			if ref.stream == st && !live[ref.name] {
				a.forget(ref)
			}
		}
	}
	return errors.Join(errs...)
}

// live lists the consumers of a stream; none when the stream is gone.
func (a *audit) live(ctx context.Context, stream string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, listWait)
	defer cancel()
	s, err := a.w.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", stream, err)
	}
	names := map[string]bool{}
	l := s.ListConsumers(ctx)
	for ci := range l.Info() { // drained to the end: the lister blocks until read
		names[ci.Name] = true
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", stream, err)
	}
	return names, nil
}

// principalOf returns the principal a user JWT's tags name, "" when none does.
func principalOf(tags []string) string {
	if p, ok := connz.PrincipalOfTags(tags); ok {
		return p.String()
	}
	return ""
}
