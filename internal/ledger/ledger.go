// Package ledger is the authority plane's connected handle. A Ledger, opened once per broker and
// space and held by whatever needs it (the mesh's daemons, the supervisor, `cotal mcp`, the CLI),
// issues every credential handed to a process through a lifecycle's gate with a ledger row,
// retires and revokes them, runs the takeover barrier and the session sweep, and has an Evictor
// make the broker refuse what it revoked.
//
// A Ledger keeps its connections, each on a short-lived credential of the least-privileged
// profile for its work (the ledger's for the auth store and the user-auth store, a provisioner's
// for an agent's durables), and renews them before they expire. Only retiring an agent dials a connection of its own: its
// deprovisioner credential is pinned to the one lifecycle it tears down.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// ControlActor is the actor of the operator's control instrument: the endpoint commands the CLI
// runs call as local.cotal_control, each on a one-shot lifecycle whose rows the standing
// lifecycle of that principal holds.
const ControlActor = "cotal_control"

// The actors of the ledger's own credentials.
const (
	ledgerActor        = "cotal_ledger"
	provisionerActor   = "cotal_provisioner"
	deprovisionerActor = "cotal_deprovisioner"
	// deregistrarActor marks an evicted manager instance exited in the service registry.
	deregistrarActor = "cotal_deregistrar"
	runOperatorActor = "cotal_run_operator"
)

// Ledger is a connected handle on one space's authority plane. It is safe for concurrent use.
type Ledger struct {
	url   string
	sp    wire.Space
	kr    *authority.Keyring
	keys  *authority.SpaceKeys
	evict Evictor
	store *held[*authstore.Store]
	prov  *held[jetstream.JetStream]
	// userauth is the user-auth store, dialled on first use (UserAuthStore).
	userauth *held[jetstream.KeyValue]
	// sessions is the key that signs session grants.
	sessions sessionKeys
}

// Option configures Open.
type Option func(*Ledger)

// WithEvictor sets how revocations reach the broker; BrokerEvictor(kr, url) by default.
func WithEvictor(ev Evictor) Option { return func(l *Ledger) { l.evict = ev } }

// Open connects to the auth store of space sp on the broker at url, with the keys in kr, and
// proves the store's shape. Close releases it.
func Open(ctx context.Context, url string, kr *authority.Keyring, sp wire.Space, opts ...Option) (*Ledger, error) {
	keys, err := kr.Space(sp)
	if err != nil {
		return nil, err
	}
	l := &Ledger{url: url, sp: sp, kr: kr, keys: keys, evict: BrokerEvictor(kr, url),
		sessions: sessionKeys{life: SessionKeyLife, reserve: sessionKeyReserve}}
	for _, o := range opts {
		o(l)
	}
	l.store = &held[*authstore.Store]{
		url:  url,
		mint: l.own(authority.ProfileLedger, ledgerActor),
		// On a cluster the stream's info can go unanswered while its leader is elected (a node
		// that has just joined, under load): the open is asked again as any ledger operation is.
		open: func(ctx context.Context, nc *nats.Conn) (s *authstore.Store, err error) {
			err = jsapi.RetryUnanswered(ctx, func(ctx context.Context) (err error) {
				s, err = authstore.Open(ctx, nc, sp)
				return err
			})
			return s, err
		},
	}
	l.prov = &held[jetstream.JetStream]{
		url:  url,
		mint: func() (*authority.Credential, error) { return MintProvisioner(kr, sp) },
		open: func(_ context.Context, nc *nats.Conn) (jetstream.JetStream, error) {
			return jetstream.New(nc)
		},
	}
	l.userauth = &held[jetstream.KeyValue]{url: url, mint: l.own(authority.ProfileLedger, ledgerActor), open: openUserAuth(sp)}
	if _, err := l.store.get(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// own returns the minter of one of the ledger's own credentials, which have no row.
func (l *Ledger) own(p authority.Profile, actor string) func() (*authority.Credential, error) {
	return func() (*authority.Credential, error) {
		return Mint(l.kr, Request{Space: l.sp, Profile: p, Name: actor})
	}
}

// MintProvisioner mints a provisioner credential for space sp without a ledger row: the one the
// mesh provisions its spaces with, before their auth stores exist.
func MintProvisioner(kr *authority.Keyring, sp wire.Space) (*authority.Credential, error) {
	return Mint(kr, Request{Space: sp, Profile: authority.ProfileProvisioner, Name: provisionerActor})
}

// Space returns the space the ledger serves.
func (l *Ledger) Space() wire.Space { return l.sp }

// Account returns the public key of the space's account.
func (l *Ledger) Account() string { return l.keys.AccountPublicKey() }

// URL returns the broker the ledger is connected to.
func (l *Ledger) URL() string { return l.url }

// Close closes the window of the ledger's sessions key, then the ledger's connections.
func (l *Ledger) Close() {
	l.sessions.retire(l)
	l.store.close()
	l.prov.close()
	l.userauth.close()
}

// run runs fn on the auth store, then has the broker refuse every user key fn reports revoked
// (even when fn also failed).
// It serves the idempotent operations (retire, revoke, sweep), so a JetStream API that did not
// answer is asked again (jsapi.RetryUnanswered).
func (l *Ledger) run(ctx context.Context, fn func(s *authstore.Store) (revoked []string, err error)) error {
	return jsapi.RetryUnanswered(ctx, func(ctx context.Context) error {
		return l.withStore(ctx, func(s *authstore.Store, _ *authority.SpaceKeys) ([]string, error) { return fn(s) })
	})
}

// withStore runs fn on the auth store with the space's signing keys, then has the broker refuse
// every user key fn reports revoked (even when fn also failed: a revocation already in the
// ledger must reach the broker). Every ledger operation that writes goes through it; the store
// is never handed out.
func (l *Ledger) withStore(ctx context.Context, fn func(s *authstore.Store, keys *authority.SpaceKeys) (revoked []string, err error)) error {
	s, err := l.store.get(ctx)
	if err != nil {
		return err
	}
	revoked, err := fn(s, l.keys)
	return l.evicted(ctx, revoked, err)
}

// evicted has the broker refuse the revoked keys of an operation that ended with err.
func (l *Ledger) evicted(ctx context.Context, revoked []string, err error) error {
	if len(revoked) > 0 {
		err = errors.Join(err, l.evict.Evict(ctx, l.sp, revoked...))
	}
	return err
}

// Issue issues a credential through the ledger, so that every credential handed to a process
// has a row that can revoke it. An agent gets a fresh lifecycle of local.<req.Name>, activated in
// the registry (an alias still held by a live lifecycle is taken over: that one is retired, its
// credentials refused by the broker); any other profile gets the standing lifecycle of its
// principal, activated on its first issue and shared by every credential of that principal.
// An empty req.Profile is the agent profile; req.Space must be empty or the ledger's space.
func (l *Ledger) Issue(ctx context.Context, req Request) (*authority.Credential, error) {
	if req.Space == "" {
		req.Space = l.sp
	}
	if req.Profile == "" {
		req.Profile = authority.ProfileAgent
	}
	if req.Space != l.sp {
		return nil, fmt.Errorf("issue %s in space %s: this ledger serves %s", req.Name, req.Space, l.sp)
	}
	g, err := req.grant()
	if err != nil {
		return nil, err
	}
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	mr := authority.MintRequest{Profile: req.Profile, Grant: g, Expires: req.Expires}
	if req.Profile != authority.ProfileAgent {
		if mr.Grant.LifecycleUID, err = standingLifecycle(ctx, s, g.Principal); err != nil {
			return nil, err
		}
		// Every credential of a standing principal commits through one gate: two commands of
		// the same principal issuing at once race for it, and the loser, whose staged row is
		// already gone, issues again against the gate as the winner left it.
		for attempt := 1; ; attempt++ {
			cred, err := s.Issue(ctx, l.keys, mr, nuid.Next())
			if !errors.Is(err, authstore.ErrConflict) || attempt == standingAttempts {
				return cred, err
			}
		}
	}
	// A live lifecycle of the name is taken over once; an activation that loses the alias to a
	// racing one has retired its own gate, so the next try is a fresh lifecycle.
	for attempt := 1; ; attempt++ {
		mr.Grant.LifecycleUID = wire.NewLifecycleUID()
		lc := wire.Lifecycle{Principal: g.Principal, UID: mr.Grant.LifecycleUID}
		og, err := s.Activate(ctx, lc, activateOp(lc))
		if err == nil {
			return s.IssueObserved(ctx, l.keys, og, mr, nuid.Next())
		}
		if !errors.Is(err, authstore.ErrConflict) || attempt == activateAttempts {
			return nil, err
		}
		if err := l.takeOver(ctx, s, lc.Principal); err != nil {
			return nil, err
		}
	}
}

// activateAttempts bounds the activations of one agent issue: the first, and one after taking
// over the lifecycle that held the name.
const activateAttempts = 2

// standingAttempts bounds the issues of one standing principal's credential that lose their
// gate's race to another issue of the same principal.
const standingAttempts = 4

func activateOp(l wire.Lifecycle) string { return "activate-" + string(l.UID) }
func retireOp(l wire.Lifecycle) string   { return "retire-" + string(l.UID) }

// standingLifecycle returns the lifecycle the alias head of p names as active, activating one
// when there is none. Of two first issues racing, the loser finds the winner's.
func standingLifecycle(ctx context.Context, s *authstore.Store, p wire.Principal) (wire.LifecycleUID, error) {
	var err error
	for range 2 {
		var h *authstore.LifecycleHead
		if h, _, err = s.Head(ctx, p); err != nil {
			return "", err
		}
		if h != nil && h.State == authstore.HeadActive {
			return h.LifecycleUID, nil
		}
		l := wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}
		if _, err = s.Activate(ctx, l, activateOp(l)); err == nil {
			return l.UID, nil
		}
		if !errors.Is(err, authstore.ErrConflict) {
			return "", err
		}
	}
	return "", fmt.Errorf("activate a lifecycle for %s: %w", p, err)
}

// takeOver retires the lifecycle the alias head of p names: its gate closes, its credentials are
// revoked and refused by the broker, whose live connections are closed, before the alias moves.
func (l *Ledger) takeOver(ctx context.Context, s *authstore.Store, p wire.Principal) error {
	h, _, err := s.Head(ctx, p)
	if err != nil || h == nil {
		return err
	}
	lc := wire.Lifecycle{Principal: p, UID: h.LifecycleUID}
	revoked, err := s.Retire(ctx, lc, retireOp(lc))
	if err = l.evicted(ctx, revoked, err); err != nil {
		return err
	}
	// Its durables go with it: nothing can read them any more, and its DM durable would keep
	// collecting what is sent to the name.
	return l.deprovision(ctx, lc)
}

// StartAgent issues an agent credential for a fresh lifecycle, provisions its durables, and
// returns it with retire, which ends the lifecycle when the agent is done (Retire). It serves
// every command that runs an agent (agent, mcp, spawn), with one policy: an agent may post to
// the concrete channels it subscribes to unless req.AllowPublish names its channels.
func (l *Ledger) StartAgent(ctx context.Context, req Request) (cred *authority.Credential, retire func(context.Context) error, err error) {
	req = req.WithDefaultPublish()
	req.Profile = authority.ProfileAgent
	if cred, err = l.activateAgent(ctx, req); err != nil {
		return nil, nil, err
	}
	return cred, func(ctx context.Context) error { return l.Retire(ctx, lifecycleOf(cred)) }, nil
}

// RunAgent issues a credential of the agent req names on its current lifecycle, the one the
// principal's alias head names as active, and provisions it again with req's role and read ACL.
// The lifecycle's dm_ durable kept its place, so a process that runs the agent again after another
// stopped receives everything sent to the agent meanwhile. Every other active credential of the
// lifecycle is revoked first and refused by the broker: a process still holding one is taken over.
//
// With no current lifecycle, or with fresh, it starts a new one as StartAgent does (taking over
// the current one, whose undelivered messages go with it). It reports whether it resumed. The
// lifecycle outlives the credential: the caller revokes the credential when its process stops
// (Revoke), and retires the lifecycle only to end the agent for good.
func (l *Ledger) RunAgent(ctx context.Context, req Request, fresh bool) (cred *authority.Credential, resumed bool, err error) {
	req = req.WithDefaultPublish()
	req.Profile = authority.ProfileAgent
	if fresh {
		cred, err = l.activateAgent(ctx, req)
		return cred, false, err
	}
	if req.Space == "" {
		req.Space = l.sp
	}
	if req.Space != l.sp {
		return nil, false, fmt.Errorf("resume %s in space %s: this ledger serves %s", req.Name, req.Space, l.sp)
	}
	g, err := req.grant()
	if err != nil {
		return nil, false, err
	}
	err = l.run(ctx, func(s *authstore.Store) (revoked []string, err error) {
		h, _, err := s.Head(ctx, g.Principal)
		if err != nil || h == nil || h.State != authstore.HeadActive {
			return nil, err
		}
		rows, err := s.Credentials(ctx, h.LifecycleUID)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.State != authstore.CredActive {
				continue
			}
			row, keys, err := s.Revoke(ctx, h.LifecycleUID, r.CredentialID, "another process resumed its lifecycle")
			if err != nil {
				return revoked, err
			}
			revoked = append(append(revoked, keys...), row.UserKey)
		}
		g.LifecycleUID = h.LifecycleUID
		cred, err = s.Issue(ctx, l.keys, authority.MintRequest{Profile: req.Profile, Grant: g, Expires: req.Expires}, nuid.Next())
		return revoked, err
	})
	switch {
	case errors.Is(err, authstore.ErrConflict):
		// The lifecycle closed under us (retired or taken over by an issue of the name): the
		// agent starts afresh, as it would have with none.
	case err != nil:
		return nil, false, err
	case cred != nil:
		if err := l.ProvisionAgent(ctx, cred, req); err != nil {
			_, rerr := l.Revoke(context.WithoutCancel(ctx), cred.LifecycleUID, cred.CredentialID, "its provisioning failed")
			return nil, false, errors.Join(err, rerr)
		}
		return cred, true, nil
	}
	cred, err = l.activateAgent(ctx, req)
	return cred, false, err
}

// activateAgent issues an agent credential for a fresh lifecycle (Issue) and provisions it; a
// provisioning that fails retires the lifecycle again.
func (l *Ledger) activateAgent(ctx context.Context, req Request) (*authority.Credential, error) {
	cred, err := l.Issue(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := l.ProvisionAgent(ctx, cred, req); err != nil {
		return nil, errors.Join(err, l.Retire(context.WithoutCancel(ctx), lifecycleOf(cred)))
	}
	return cred, nil
}

// lifecycleOf returns the lifecycle a credential is issued on.
func lifecycleOf(cred *authority.Credential) wire.Lifecycle {
	return wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}
}

// ProvisionAgent pre-creates the durables of an agent credential's lifecycle, issued for req, and
// records its read ACL for the delivery daemon. The principal's first lifecycle (the alias head
// names it at process epoch 1) takes the DMs stored for the principal before it ever ran
// (space.Agent.First).
//
// Provisioning is idempotent, so a JetStream API that did not answer is asked again
// (jsapi.RetryUnanswered).
func (l *Ledger) ProvisionAgent(ctx context.Context, cred *authority.Credential, req Request) error {
	js, err := l.prov.get(ctx)
	if err != nil {
		return err
	}
	s, err := l.store.get(ctx)
	if err != nil {
		return err
	}
	h, _, err := s.Head(ctx, cred.Principal)
	if err != nil {
		return err
	}
	first := h != nil && h.LifecycleUID == cred.LifecycleUID && h.ProcessEpoch == authstore.FirstEpoch
	agent := space.Agent{Lifecycle: lifecycleOf(cred), Role: req.Role, AllowSubscribe: req.readACL(), First: first}
	return jsapi.RetryUnanswered(ctx, func(ctx context.Context) error { return space.ProvisionAgent(ctx, js, l.sp, agent) })
}

// Retire ends a lifecycle: in the ledger its gate closes, its credentials are revoked and the
// alias head released, and the broker refuses them; then its dm_ and dlv_ durables and its ACL
// row are deleted (after which the delivery daemon drops what is still addressed to it). Pieces
// already gone are not an error. A lifecycle's UID is never reused, so its credentials bind
// nothing afterwards.
func (l *Ledger) Retire(ctx context.Context, lc wire.Lifecycle) error {
	err := l.run(ctx, func(s *authstore.Store) ([]string, error) {
		return s.Retire(ctx, lc, retireOp(lc))
	})
	return errors.Join(err, l.deprovision(ctx, lc))
}

// Retired reports whether lifecycle uid's gate is retired: a retirement already done.
func (l *Ledger) Retired(ctx context.Context, uid wire.LifecycleUID) (bool, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return false, err
	}
	og, err := s.ObserveGate(ctx, uid)
	return err == nil && og != nil && og.Row.State == authstore.GateRetired, err
}

// Revoke revokes one credential of a lifecycle, recording reason: its ledger row, then the
// broker.
func (l *Ledger) Revoke(ctx context.Context, uid wire.LifecycleUID, credentialID, reason string) (*authstore.CredentialRow, error) {
	var row *authstore.CredentialRow
	err := l.run(ctx, func(s *authstore.Store) (keys []string, err error) {
		row, keys, err = s.Revoke(ctx, uid, credentialID, reason)
		return keys, err
	})
	return row, err
}

// Renew renews cred in place for life: the same key and permissions, a fresh JWT (see
// authstore.Store.Renew). The holder swaps the JWT on its connection (dial.Renewing).
func (l *Ledger) Renew(ctx context.Context, cred *authority.Credential, life time.Duration) (*authority.Credential, error) {
	if cred.CredentialID == "" {
		return nil, fmt.Errorf("renew a %s credential of %s: it has no ledger row", cred.Profile, cred.Principal)
	}
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Renew(ctx, l.keys, cred.LifecycleUID, cred.CredentialID, life)
}

// RevokeUserKey revokes the credential issued to userKey: its ledger row moves to revoked with
// reason (taking down the sessions it called, as Revoke does), then the broker refuses it and
// every key the revocation reached. It returns the principal the row names.
//
// The broker is told even when the ledger cannot be: a key with no ledger row (the mesh's own
// bootstrap credentials, a one-minute operator) or a ledger that cannot be read or written still
// has the key refused, and the ledger's error is returned beside it. The rows are scanned, one
// read per row: it is meant for the rare revocation, not for a lookup per request.
func (l *Ledger) RevokeUserKey(ctx context.Context, userKey, reason string) (string, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return "", l.evicted(ctx, []string{userKey}, fmt.Errorf("revoke %s: %w", userKey, err))
	}
	// A malformed row elsewhere in the ledger does not hide this one: Credentials returns the
	// well-formed rows beside its error, which matters only if the key is not among them.
	rows, listErr := s.Credentials(ctx, "")
	for _, r := range rows {
		if r.UserKey != userKey {
			continue
		}
		_, keys, err := s.Revoke(ctx, r.LifecycleUID, r.CredentialID, reason)
		if err != nil {
			err = fmt.Errorf("revoke %s of %s: %w", r.CredentialID, r.Principal, err)
		}
		if !slices.Contains(keys, userKey) {
			keys = append(keys, userKey)
		}
		return r.Principal, l.evicted(ctx, keys, err)
	}
	if listErr != nil {
		listErr = fmt.Errorf("revoke %s: %w", userKey, listErr)
	}
	return "", l.evicted(ctx, []string{userKey}, listErr)
}

// RevokePrincipal revokes every active credential issued to p, recording reason, and has the
// broker refuse each: what the warden does to a principal it caught aiming a reply subject at a
// store. It returns how many credentials it revoked; the rows are scanned, as RevokeUserKey's are.
func (l *Ledger) RevokePrincipal(ctx context.Context, p wire.Principal, reason string) (int, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("revoke %s: %w", p, err)
	}
	rows, listErr := s.Credentials(ctx, "")
	var keys []string
	var errs []error
	n := 0
	for _, r := range rows {
		if r.Principal != p.String() || r.State != authstore.CredActive {
			continue
		}
		n++
		_, reached, err := s.Revoke(ctx, r.LifecycleUID, r.CredentialID, reason)
		if err != nil {
			errs = append(errs, fmt.Errorf("revoke %s of %s: %w", r.CredentialID, p, err))
		}
		keys = append(keys, reached...)
		if !slices.Contains(keys, r.UserKey) {
			keys = append(keys, r.UserKey)
		}
	}
	if listErr != nil && len(keys) == 0 {
		errs = append(errs, fmt.Errorf("revoke %s: %w", p, listErr))
	}
	if len(keys) == 0 {
		return 0, errors.Join(errs...)
	}
	return n, l.evicted(ctx, keys, errors.Join(errs...))
}

// Takeover runs the takeover barrier on a lifecycle whose process is being replaced: its gate
// freezes, its credentials are revoked and their connections closed (verified through the
// evictor), the alias head moves to the next process epoch and the gate reopens. It returns the
// new epoch; the lifecycle's next credential is issued at it.
//
// opID names this takeover: running it again with the same opID resumes a barrier that stopped
// part way, or returns the epoch of one that completed.
func (l *Ledger) Takeover(ctx context.Context, lc wire.Lifecycle, opID string) (int64, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return 0, err
	}
	return s.Takeover(ctx, lc, opID, func(ctx context.Context, keys []string) error {
		return l.evict.Evict(ctx, l.sp, keys...)
	})
}

// Sweep runs one session sweep: sessions past their exp are terminated and their halves refused
// by the broker, and unfinished revocations are retried. A malformed row fails only itself; the
// errors of every row that failed are joined.
func (l *Ledger) Sweep(ctx context.Context, now time.Time) error {
	return l.run(ctx, func(s *authstore.Store) ([]string, error) {
		res, err := s.SweepSessions(ctx, now)
		if err != nil {
			return nil, err
		}
		return res.RevokedKeys, errors.Join(res.Failed...)
	})
}

// Retention is how long the ledger keeps what has ended: closed sessions with their stage pins,
// and revocations of credentials whose rows are gone. It is SPEC §13.8's default idempotency
// horizon.
const Retention = 24 * time.Hour

// Pruned is what one Prune pass removed.
type Pruned struct {
	Sessions    int
	Revocations int
}

// Prune removes what ended at least retention before now: the rows of ended sessions whose
// halves were revoked, with their stage pins; and the revocations of user keys that no
// credential row names any more. A credential row lives as long as its credential (the bucket
// drops it at expiry; one that never expires is never dropped), so a revocation without a row
// guards a credential that can no longer connect (serving credentials' epcred rows count as
// rows). The broker gets the shorter list at once.
// With a ledger row it cannot read, revocations are kept.
func (l *Ledger) Prune(ctx context.Context, now time.Time, retention time.Duration) (*Pruned, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	p := &Pruned{}
	var errs []error
	if p.Sessions, err = s.PruneSessions(ctx, now, retention); err != nil {
		errs = append(errs, err)
	}
	rows, err := l.Credentials(ctx)
	if err != nil {
		return p, errors.Join(append(errs, fmt.Errorf("keep every revocation: %w", err))...)
	}
	named := make(map[string]bool, len(rows))
	for _, r := range rows {
		named[r.UserKey] = true
	}
	if p.Revocations, err = l.kr.PruneRevocations(ctx, l.sp, func(key string, at time.Time) bool {
		return !named[key] && now.Sub(at) >= retention
	}); err != nil {
		errs = append(errs, err)
	} else if p.Revocations > 0 {
		errs = append(errs, l.evict.Evict(ctx, l.sp))
	}
	return p, errors.Join(errs...)
}

// Credentials lists the ledger's credential rows: the lifecycles' credentials, then the
// serving credentials of the endpoint instances (a manager's).
func (l *Ledger) Credentials(ctx context.Context) ([]authstore.CredentialRow, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.Credentials(ctx, "")
	serving, serr := s.ServingCredentials(ctx)
	return append(rows, serving...), errors.Join(err, serr)
}

// ActiveCredential returns the JWT of an active credential of the lifecycle uid issued for
// profile: what that lifecycle may do, as the broker enforces it. A lifecycle with none is an error.
func (l *Ledger) ActiveCredential(ctx context.Context, uid wire.LifecycleUID, profile authority.Profile) (string, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return "", err
	}
	rows, err := s.Credentials(ctx, uid)
	for _, r := range rows {
		if r.State == authstore.CredActive && r.Profile == profile {
			return r.JWT, nil
		}
	}
	return "", errors.Join(fmt.Errorf("lifecycle %s holds no active %s credential", uid, profile), err)
}

// Repair repairs every corrupt row of the auth store it knows how to, failing safe, and has the
// broker refuse every key the repairs revoked (authstore.Store.RepairAll).
func (l *Ledger) Repair(ctx context.Context) ([]authstore.Repair, error) {
	var repairs []authstore.Repair
	err := l.withStore(ctx, func(s *authstore.Store, keys *authority.SpaceKeys) (revoked []string, err error) {
		repairs, revoked, err = s.RepairAll(ctx, keys)
		return revoked, err
	})
	return repairs, err
}

// Check proves the auth store's shape and checks every row.
func (l *Ledger) Check(ctx context.Context) (*authstore.Checkup, error) {
	s, err := l.store.get(ctx)
	if err != nil {
		return nil, err
	}
	return s.Check(ctx)
}
