package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/connz"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// An Evictor makes the broker refuse revoked user keys of a space and close their live
// connections. A Ledger calls it after every ledger operation that revoked credentials, even one
// that also failed: a revocation already in the ledger must reach the broker.
type Evictor interface {
	Evict(ctx context.Context, sp wire.Space, userKeys ...string) error
}

// EvictFunc adapts a function to an Evictor.
type EvictFunc func(ctx context.Context, sp wire.Space, userKeys ...string) error

// Evict calls f.
func (f EvictFunc) Evict(ctx context.Context, sp wire.Space, userKeys ...string) error {
	return f(ctx, sp, userKeys...)
}

// evictionWait bounds how long the broker evictor waits for the broker to close a revoked
// credential's connections.
const evictionWait = 10 * time.Second

// BrokerEvictor returns the evictor of the broker at url: it records the revoked keys with the
// space's account in kr and pushes the updated account JWT to the broker (a $SYS claims update,
// which every server of a cluster receives), on a system credential minted for the one push.
// From then on the broker refuses those credentials at connect and closes their live
// connections; Evict returns once no server's connection list (CONNZ) shows any of them, and
// pushes again while one does. On a cluster whose servers share the distributed resolver, the
// push carries, and the list takes in, the revocations other authority nodes pushed (reconcile).
// Once the broker showed it runs alone (no server answers the lookup), the evictor pushes at
// once from then on.
func BrokerEvictor(kr *authority.Keyring, url string) Evictor {
	var alone atomic.Bool
	return EvictFunc(func(ctx context.Context, sp wire.Space, userKeys ...string) error {
		return pushRevocations(ctx, kr, url, sp, userKeys, &alone)
	})
}

// revoker connects a system user of kr to url for the pushes of sp's account: it may push the
// account's claims, look them up on every server and list the account's connections.
func revoker(ctx context.Context, kr *authority.Keyring, url string, sp wire.Space) (*nats.Conn, string, error) {
	sk, err := kr.Space(sp)
	if err != nil {
		return nil, "", err
	}
	acct := sk.AccountPublicKey()
	nc, err := dialSystem(ctx, kr, url, "cotal-revoker", jsapi.AccountClaimsUpdate(acct), jsapi.AccountClaimsLookup(acct), jsapi.AccountConnz(acct))
	if err != nil {
		return nil, "", err
	}
	return nc, acct, nil
}

// dialSystem connects to url a system user of kr, named name and living a minute, that may
// publish pubAllow: the short-lived hands of the authority's $SYS requests.
func dialSystem(ctx context.Context, kr *authority.Keyring, url, name string, pubAllow ...string) (*nats.Conn, error) {
	sys, err := kr.MintSystemUser(name, pubAllow, nil, time.Minute)
	if err != nil {
		return nil, err
	}
	return dial.As(ctx, url, sys)
}

func pushRevocations(ctx context.Context, kr *authority.Keyring, url string, sp wire.Space, userKeys []string, alone *atomic.Bool) error {
	// The keys are recorded before anything can fail: a push that does not happen now is made by
	// the next one, by the next reconcile, or by the next start of the broker, which loads the list.
	// A revocation already in the ledger must be recorded and reach the broker even when the
	// caller's context is nearly spent.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*evictionWait)
	defer cancel()
	if err := kr.Revoke(ctx, sp, userKeys...); err != nil {
		return err
	}
	nc, acct, err := revoker(ctx, kr, url, sp)
	if err != nil {
		return err
	}
	defer nc.Close()
	servers, err := reconcile(ctx, nc, kr, sp, acct, true, alone)
	if err != nil || len(userKeys) == 0 {
		return err
	}
	vctx, cancelWait := context.WithTimeout(ctx, evictionWait)
	defer cancelWait()
	pushed, counted := time.Now(), time.Now()
	for {
		// A listing that fails (a server slow to answer while the cluster elects leaders) is
		// asked again while the wait lasts.
		conns, answered, err := connz.OfUsers(vctx, nc, acct, userKeys, servers)
		live := len(conns)
		// A server that did not answer this time may still serve a revoked connection: every
		// server known to be up must have answered.
		if err == nil && live == 0 && answered >= servers {
			return nil
		}
		if err == nil && live == 0 && time.Since(counted) > recountAfter && !alone.Load() {
			// Fewer servers answer than were up: count them again, in case one went down.
			if tokens, lerr := dial.ServersOn(vctx, nc, jsapi.AccountClaimsLookup(acct), lookupFirst, lookupMore); lerr == nil {
				servers, counted = max(len(tokens), answered), time.Now()
			}
		}
		if live > 0 && time.Since(pushed) > repushAfter && hasTime(vctx, repushNeeds) {
			// A server still serves a revoked connection: the push did not reach it, or a newer
			// JWT without the revocation replaced it there. Push the whole list again; a push
			// that fails now is tried again on the next turn while the wait lasts.
			if n, err := reconcile(vctx, nc, kr, sp, acct, true, alone); err == nil {
				servers = max(servers, n)
			}
			pushed = time.Now()
		}
		select {
		case <-vctx.Done():
			switch {
			case err != nil:
				return fmt.Errorf("verify the eviction: %w", err)
			case live == 0:
				return fmt.Errorf("verify the eviction: %d of the %d servers up answered the connection list within %s", answered, servers, evictionWait)
			}
			return fmt.Errorf("verify the eviction: %d revoked connections still open after %s", live, evictionWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EvictConnectionsOf closes every live connection of the space that acts as p under a credential
// the auth callout minted (a person's bearer, which the broker lists under p's name-form and
// reports no JWT for): each server is asked to close its own (KICK), and the call returns once no
// server lists one, or fails when one is still listed after evictionWait. It returns how many
// connections it closed. The callout refuses the next connect of a person whose row was deleted
// or whose incarnation moved on; this ends the connections already open, which would otherwise
// last as long as their bearer.
func (l *Ledger) EvictConnectionsOf(ctx context.Context, p wire.Principal) (int, error) {
	acct := l.keys.AccountPublicKey()
	nc, err := dialSystem(ctx, l.kr, l.url, "cotal-evictor", jsapi.AccountConnz(acct), jsapi.ServerKickAny)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	vctx, cancel := context.WithTimeout(ctx, evictionWait)
	defer cancel()
	type conn struct {
		server string
		cid    uint64
	}
	kicked := map[conn]bool{}
	for {
		conns, _, err := connz.OfUsers(vctx, nc, acct, []string{p.Name()}, 0)
		if err == nil && len(conns) == 0 {
			return len(kicked), nil
		}
		for _, c := range conns {
			body, _ := json.Marshal(map[string]uint64{"cid": c.CID}) // always encodes
			if _, err := nc.RequestWithContext(vctx, jsapi.ServerKick(c.Server), body); err == nil {
				kicked[conn{c.Server, c.CID}] = true
			}
		}
		select {
		case <-vctx.Done():
			if err != nil {
				return len(kicked), fmt.Errorf("close the connections of %s: %w", p, err)
			}
			return len(kicked), fmt.Errorf("close the connections of %s: %d still open after %s", p, len(conns), evictionWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// repushAfter is how long a revoked connection may stay listed after a push before the list is
// pushed again, and repushNeeds the time a push and its read-back take at most: the lookup's
// first answer, the settling and the push itself. recountAfter is how long fewer servers may
// answer than were counted up before they are counted again.
const (
	repushAfter  = 2 * time.Second
	repushNeeds  = lookupFirst + settle + time.Second
	recountAfter = 2 * time.Second
)

// hasTime reports whether ctx leaves at least d.
func hasTime(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) >= d
}

// PushStoreAccount pushes the JWT of the space's store account, rendered from the keyring, to the
// cluster at the ledger's URL: the servers' resolver keeps the JWT it was first given, so the
// storage limits an authority node starts with reach a cluster only by a push. (A single server's
// in-memory resolver takes the JWT its configuration carries.)
func (l *Ledger) PushStoreAccount(ctx context.Context) error {
	token, err := l.kr.StoreAccountJWT(l.keys)
	if err != nil {
		return err
	}
	acct := l.keys.StorePublicKey()
	nc, err := dialSystem(ctx, l.kr, l.url, "cotal-store-pusher", jsapi.AccountClaimsUpdate(acct))
	if err != nil {
		return err
	}
	defer nc.Close()
	return pushClaims(ctx, nc, acct, token)
}

// ReconcileRevocations brings the revocations of the ledger's space in its keyring and on the
// cluster at its URL together (reconcileRevocations).
func (l *Ledger) ReconcileRevocations(ctx context.Context) error {
	return reconcileRevocations(ctx, l.kr, l.url, l.sp)
}

// reconcileRevocations brings the revocations of sp in kr and on the cluster at url together:
// the list takes in what any server's account JWT revokes (another authority node's revocations),
// and when a server's JWT lacks one of the list's, the account JWT rendered from the whole list
// is pushed. On a single server with the in-memory resolver there is nothing to compare, and it
// does nothing. An authority node runs it at start and then periodically, so a push that failed,
// or one another node's concurrent push overtook, still reaches every server.
func reconcileRevocations(ctx context.Context, kr *authority.Keyring, url string, sp wire.Space) error {
	nc, acct, err := revoker(ctx, kr, url, sp)
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = reconcile(ctx, nc, kr, sp, acct, false, new(atomic.Bool))
	return err
}

// reconcileRounds bounds the pushes of one reconcile: each round merges what the servers hold and
// pushes again only when one of them still lacks a revocation (another node's push overtook it).
const reconcileRounds = 5

// The waits for the servers' lookups: the first answer, then each next.
const (
	lookupFirst = 2 * time.Second
	lookupMore  = 250 * time.Millisecond
)

// settle is how long a push on a cluster is left to land before the servers are read back: the
// resolver keeps the newest JWT it is given, with no compare-and-set, so a push another authority
// node made at the same moment, without this one's revocations, can replace it. Read back after
// the two landed, the merge takes both in and pushes them together.
const settle = 500 * time.Millisecond

// reconcile merges into kr what the servers' account JWTs of sp revoke and pushes the JWT
// rendered from the merged list while one of them lacks part of it (at once when push is set),
// under the keyring's lock so the last local push carries every revocation. A broker that runs
// alone (no server answered a lookup) is recorded in alone, and then not asked again. It returns
// the most servers that answered one of its lookups (0 alone).
func reconcile(ctx context.Context, nc *nats.Conn, kr *authority.Keyring, sp wire.Space, acct string, push bool, alone *atomic.Bool) (servers int, err error) {
	for round := 0; ; round++ {
		var answered int
		var behind bool
		if !alone.Load() {
			if answered, behind, err = mergeLive(ctx, nc, kr, sp, acct); err != nil {
				return servers, err
			}
			servers = max(servers, answered)
			alone.Store(answered == 0)
		}
		if round > 0 && answered > 0 && !behind {
			// Pushed and read back whole: read again once a concurrent push landed too.
			if err := sleep(ctx, settle); err != nil {
				return servers, err
			}
			if answered, behind, err = mergeLive(ctx, nc, kr, sp, acct); err != nil {
				return servers, err
			}
			servers = max(servers, answered)
		}
		if !push && !behind {
			return servers, nil
		}
		if round == reconcileRounds {
			return servers, fmt.Errorf("push the revocations of space %s: a server still lacks some after %d pushes", sp, round)
		}
		if err := kr.RevokeAndPush(ctx, sp, nil, func(token string) error { return pushClaims(ctx, nc, acct, token) }); err != nil {
			return servers, err
		}
		push = false
	}
}

// mergeLive asks every server for its JWT of the account, merges their revocations into kr's list
// and reports how many servers answered (none: the in-memory resolver of a single server, with
// nothing to merge and nothing behind) and whether any of them lacks one of the list's.
func mergeLive(ctx context.Context, nc *nats.Conn, kr *authority.Keyring, sp wire.Space, acct string) (servers int, behind bool, err error) {
	tokens, err := dial.ServersOn(ctx, nc, jsapi.AccountClaimsLookup(acct), lookupFirst, lookupMore)
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up the account of space %s on the servers: %w", sp, err)
	}
	since := time.Now().Add(-Retention)
	for _, t := range tokens {
		if len(t) == 0 {
			behind = true // a server without the account yet: the push gives it
			continue
		}
		if _, err := kr.MergeRevocations(ctx, sp, string(t), since); err != nil {
			return len(tokens), false, err
		}
	}
	for _, t := range tokens {
		if len(t) == 0 {
			continue
		}
		ok, err := kr.Carries(sp, string(t))
		if err != nil {
			return len(tokens), false, err
		}
		behind = behind || !ok
	}
	return len(tokens), behind, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// pushClaims pushes the account JWT token and checks the broker took it.
func pushClaims(ctx context.Context, nc *nats.Conn, acct, token string) error {
	pctx, cancel := context.WithTimeout(ctx, evictionWait)
	defer cancel()
	rep, err := nc.RequestWithContext(pctx, jsapi.AccountClaimsUpdate(acct), []byte(token))
	if err != nil {
		return fmt.Errorf("push the account to the broker: %w", err)
	}
	var res struct {
		Data  *struct{ Message string } `json:"data"`
		Error *struct{ Description string }
	}
	if json.Unmarshal(rep.Data, &res) != nil || res.Error != nil || res.Data == nil || !strings.Contains(res.Data.Message, "updated") {
		return fmt.Errorf("push the account to the broker: it answered %s", rep.Data)
	}
	return nil
}

// EvictKeys has the broker refuse userKeys, which no ledger row holds (a remote manager's
// identities signed for keys its holder generated), and close their connections.
func (l *Ledger) EvictKeys(ctx context.Context, userKeys ...string) error {
	return l.evicted(ctx, userKeys, nil)
}
