package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/wire"
)

// The authority plane as the CLI and the mesh drive it: every agent credential is issued through
// its lifecycle's gate with a ledger row, and a revocation is pushed to the running broker,
// which refuses the credential and closes its connections.

// ErrAgentNeedsLedger is returned by Mint for the agent profile: agent credentials are issued
// through the ledger (IssueAgent), so that each has a row that can revoke it.
var ErrAgentNeedsLedger = errors.New("agent credentials are issued through the ledger (IssueAgent) so that each can be revoked")

// store connects the authority's one-shot ledger credential and opens the space's auth store.
func (a *Authority) store(ctx context.Context, url string, sp wire.Space) (*authority.AuthStore, *nats.Conn, error) {
	cred, err := a.mint(MintRequest{Space: sp, Profile: authority.ProfileLedger, Name: "cotal_ledger"})
	if err != nil {
		return nil, nil, err
	}
	nc, err := Connect(ctx, url, cred)
	if err != nil {
		return nil, nil, err
	}
	s, err := authority.OpenAuthStore(ctx, nc, sp)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return s, nc, nil
}

// Ledger runs fn on the space's auth store under the authority's one-shot ledger credential,
// with the space's signing keys, then makes the broker refuse every user key fn reports revoked
// (even when fn also failed: a revocation already in the ledger must reach the broker).
func (a *Authority) Ledger(ctx context.Context, url string, sp wire.Space, fn func(s *authority.AuthStore, keys *authority.SpaceKeys) (revoked []string, err error)) error {
	sk, err := a.keyring.Space(sp)
	if err != nil {
		return err
	}
	s, nc, err := a.store(ctx, url, sp)
	if err != nil {
		return err
	}
	defer nc.Close()
	revoked, err := fn(s, sk)
	return a.pushRevoked(ctx, url, sp, revoked, err)
}

// pushRevoked pushes the revoked user keys of a ledger operation that ended with err.
func (a *Authority) pushRevoked(ctx context.Context, url string, sp wire.Space, revoked []string, err error) error {
	if len(revoked) > 0 {
		err = errors.Join(err, a.PushRevocations(ctx, url, sp, revoked...))
	}
	return err
}

// IssueAgent issues an agent credential for a fresh lifecycle of local.<req.Name>: the lifecycle
// is activated in the registry (an alias still held by a live lifecycle is taken over: that one
// is retired, its credentials revoked at the broker), then the credential is issued through the
// new lifecycle's gate with its ledger row. It connects to the ledger for this one issue; a caller
// issuing many holds an Issuer instead.
func (a *Authority) IssueAgent(ctx context.Context, url string, req MintRequest) (*authority.Credential, error) {
	is, err := a.Issuer(ctx, url, req.Space)
	if err != nil {
		return nil, err
	}
	defer is.Close()
	return is.IssueAgent(ctx, req)
}

// Issuer issues agent credentials in one space over one held ledger connection, for callers that
// issue many: connecting and proving the auth store's shape cost more than the issue itself. It is
// safe for concurrent use, and lives as long as its ledger credential (authority.OneShotLifetime).
type Issuer struct {
	a   *Authority
	url string
	sp  wire.Space
	s   *authority.AuthStore
	nc  *nats.Conn
}

// Issuer connects to the ledger of space sp at url. Close releases it.
func (a *Authority) Issuer(ctx context.Context, url string, sp wire.Space) (*Issuer, error) {
	s, nc, err := a.store(ctx, url, sp)
	if err != nil {
		return nil, err
	}
	return &Issuer{a: a, url: url, sp: sp, s: s, nc: nc}, nil
}

// IssueAgent issues an agent credential for a fresh lifecycle of local.<req.Name>, as
// Authority.IssueAgent does. req.Space must be empty or the issuer's space.
func (is *Issuer) IssueAgent(ctx context.Context, req MintRequest) (*authority.Credential, error) {
	if req.Space == "" {
		req.Space = is.sp
	}
	if req.Space != is.sp {
		return nil, fmt.Errorf("issue agent %s in space %s: this issuer serves %s", req.Name, req.Space, is.sp)
	}
	req.Profile = authority.ProfileAgent
	g, sk, err := is.a.grant(req)
	if err != nil {
		return nil, err
	}
	g.LifecycleUID = wire.NewLifecycleUID()
	l := wire.Lifecycle{Principal: g.Principal, UID: g.LifecycleUID}
	og, err := is.s.Activate(ctx, l, "activate-"+string(l.UID))
	if errors.Is(err, authority.ErrConflict) {
		if err = is.a.takeOver(ctx, is.url, is.s, l.Principal); err == nil {
			og, err = is.s.Activate(ctx, l, "activate-"+string(l.UID))
		}
	}
	if err != nil {
		return nil, err
	}
	return is.s.IssueObserved(ctx, sk, og, authority.MintRequest{Profile: authority.ProfileAgent, Grant: g, Expires: req.Expires}, nuid.Next())
}

// Close closes the issuer's ledger connection.
func (is *Issuer) Close() { is.nc.Close() }

// StartAgent issues an agent credential for a fresh lifecycle, provisions its durables, and
// returns it with retire, which ends the lifecycle when the agent is done: its credential revoked
// at the broker, its durables and ACL row deleted. It serves every command that runs an agent
// (agent, mcp, spawn), with one policy: an agent may post to the concrete channels it subscribes
// to unless req.AllowPublish names its channels.
func (a *Authority) StartAgent(ctx context.Context, url string, req MintRequest) (cred *authority.Credential, retire func(context.Context) error, err error) {
	req = req.withDefaultPublish()
	if cred, err = a.IssueAgent(ctx, url, req); err != nil {
		return nil, nil, err
	}
	l := wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}
	retire = func(ctx context.Context) error {
		return errors.Join(a.RetireLifecycle(ctx, url, req.Space, l), a.Retire(ctx, url, req.Space, l))
	}
	if err := a.ProvisionAgent(ctx, url, cred, req); err != nil {
		return nil, nil, errors.Join(err, retire(ctx))
	}
	return cred, retire, nil
}

// withDefaultPublish returns r with AllowPublish defaulted to the concrete channels of Subscribe
// (a pattern names no channel to post to) when it names none.
func (r MintRequest) withDefaultPublish() MintRequest {
	if len(r.AllowPublish) > 0 {
		return r
	}
	for _, ch := range r.Subscribe {
		if wire.IsConcreteChannel(ch) {
			r.AllowPublish = append(r.AllowPublish, ch)
		}
	}
	return r
}

// Issue issues a credential through the ledger, so that every credential handed to a process has
// a row that can revoke it: an agent through a fresh lifecycle (IssueAgent); any other profile
// through the standing lifecycle of its principal, activated on its first issue and shared by
// every credential of that principal. Only the mesh's own bootstrap credentials (the ledger's,
// the provisioner's before the store exists) and one-minute operators are minted without a row.
func (a *Authority) Issue(ctx context.Context, url string, req MintRequest) (*authority.Credential, error) {
	if req.Profile == authority.ProfileAgent {
		return a.IssueAgent(ctx, url, req)
	}
	g, sk, err := a.grant(req)
	if err != nil {
		return nil, err
	}
	s, nc, err := a.store(ctx, url, req.Space)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if g.LifecycleUID, err = standingLifecycle(ctx, s, g.Principal); err != nil {
		return nil, err
	}
	return s.Issue(ctx, sk, authority.MintRequest{Profile: req.Profile, Grant: g, Expires: req.Expires}, nuid.Next())
}

// standingLifecycle returns the lifecycle the alias head of p names as active, activating one
// when there is none. Of two first issues racing, the loser finds the winner's.
func standingLifecycle(ctx context.Context, s *authority.AuthStore, p wire.Principal) (wire.LifecycleUID, error) {
	var err error
	for range 2 {
		var h *authority.LifecycleHead
		if h, _, err = s.Head(ctx, p); err != nil {
			return "", err
		}
		if h != nil && h.State == authority.HeadActive {
			return h.LifecycleUID, nil
		}
		l := wire.Lifecycle{Principal: p, UID: wire.NewLifecycleUID()}
		if _, err = s.Activate(ctx, l, "activate-"+string(l.UID)); err == nil {
			return l.UID, nil
		}
		if !errors.Is(err, authority.ErrConflict) {
			return "", err
		}
	}
	return "", fmt.Errorf("activate a lifecycle for %s: %w", p, err)
}

// takeOver retires the lifecycle the alias head names: its gate closes, its credentials are
// revoked and refused by the broker, whose live connections are closed, before the alias moves.
func (a *Authority) takeOver(ctx context.Context, url string, s *authority.AuthStore, p wire.Principal) error {
	h, _, err := s.Head(ctx, p)
	if err != nil || h == nil {
		return err
	}
	return a.retire(ctx, url, s, wire.Lifecycle{Principal: p, UID: h.LifecycleUID})
}

// TakeoverProcess runs the takeover barrier on a lifecycle whose process is being replaced: its
// gate freezes, its credentials are revoked and their connections closed (verified through
// CONNZ), the alias head moves to the next process epoch and the gate reopens. It returns the
// new epoch; the lifecycle's next credential is issued at it.
//
// opID names this takeover: running it again with the same opID resumes a barrier that stopped
// part way, or returns the epoch of one that completed.
func (a *Authority) TakeoverProcess(ctx context.Context, url string, sp wire.Space, l wire.Lifecycle, opID string) (int64, error) {
	s, nc, err := a.store(ctx, url, sp)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	return s.Takeover(ctx, l, opID, func(ctx context.Context, keys []string) error {
		return a.PushRevocations(ctx, url, sp, keys...)
	})
}

// RetireLifecycle retires a lifecycle in the ledger (gate, credentials, head) and makes the
// broker refuse its credentials.
func (a *Authority) RetireLifecycle(ctx context.Context, url string, sp wire.Space, l wire.Lifecycle) error {
	return a.Ledger(ctx, url, sp, func(s *authority.AuthStore, _ *authority.SpaceKeys) ([]string, error) {
		return s.Retire(ctx, l, retireOp(l))
	})
}

func (a *Authority) retire(ctx context.Context, url string, s *authority.AuthStore, l wire.Lifecycle) error {
	revoked, err := s.Retire(ctx, l, retireOp(l))
	return a.pushRevoked(ctx, url, s.Space(), revoked, err)
}

func retireOp(l wire.Lifecycle) string { return "retire-" + string(l.UID) }

// RevokeCredential revokes one credential: its ledger row, then the broker.
func (a *Authority) RevokeCredential(ctx context.Context, url string, sp wire.Space, uid wire.LifecycleUID, credentialID string) (*authority.CredentialRow, error) {
	s, nc, err := a.store(ctx, url, sp)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	row, keys, err := s.Revoke(ctx, uid, credentialID, "revoked by the operator")
	return row, a.pushRevoked(ctx, url, sp, keys, err)
}

// Credentials lists the ledger's credential rows of a space.
func (a *Authority) Credentials(ctx context.Context, url string, sp wire.Space) ([]authority.CredentialRow, error) {
	s, nc, err := a.store(ctx, url, sp)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	return s.Credentials(ctx, "")
}

// evictionWait bounds how long PushRevocations waits for the broker to close a revoked
// credential's connections.
const evictionWait = 10 * time.Second

// PushRevocations records revoked user keys with the space's account and pushes the updated
// account JWT to the running broker (a $SYS claims update, which every server of a cluster
// receives): from then on the broker refuses those credentials at connect and closes their live
// connections. It returns once the broker's connection list (CONNZ) shows none of them.
func (a *Authority) PushRevocations(ctx context.Context, url string, sp wire.Space, userKeys ...string) error {
	if err := a.keyring.Revoke(sp, userKeys...); err != nil {
		return err
	}
	sk, err := a.keyring.Space(sp)
	if err != nil {
		return err
	}
	acct := sk.AccountPublicKey()
	token, err := a.keyring.AccountJWT(sk)
	if err != nil {
		return err
	}
	update, connz := jsapi.AccountClaimsUpdate(acct), jsapi.AccountConnz(acct)
	sys, err := a.keyring.MintSystemUser("cotal-revoker", []string{update, connz}, time.Minute)
	if err != nil {
		return err
	}
	nc, err := Connect(ctx, url, sys)
	if err != nil {
		return err
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, evictionWait)
	defer cancel()
	rep, err := nc.RequestWithContext(rctx, update, []byte(token))
	if err != nil {
		return fmt.Errorf("push the revocation to the broker: %w", err)
	}
	var res struct {
		Data  *struct{ Message string } `json:"data"`
		Error *struct{ Description string }
	}
	if json.Unmarshal(rep.Data, &res) != nil || res.Error != nil || res.Data == nil || !strings.Contains(res.Data.Message, "updated") {
		return fmt.Errorf("push the revocation to the broker: it answered %s", rep.Data)
	}
	for {
		live, err := liveConnections(rctx, nc, connz, userKeys)
		if err != nil {
			return fmt.Errorf("verify the eviction: %w", err)
		}
		if live == 0 {
			return nil
		}
		select {
		case <-rctx.Done():
			return fmt.Errorf("verify the eviction: %d revoked connections still open after %s", live, evictionWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// liveConnections counts the connections CONNZ lists for any of the user keys.
func liveConnections(ctx context.Context, nc *nats.Conn, connz string, userKeys []string) (int, error) {
	req, _ := json.Marshal(map[string]any{"auth": true, "limit": 100000}) // always encodes
	rep, err := nc.RequestWithContext(ctx, connz, req)
	if err != nil {
		return 0, err
	}
	var res struct {
		Data *struct {
			Connections []struct {
				AuthorizedUser string `json:"authorized_user"`
				NKey           string `json:"nkey"`
			} `json:"connections"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rep.Data, &res); err != nil || res.Data == nil {
		return 0, fmt.Errorf("unexpected CONNZ reply %s", rep.Data)
	}
	n := 0
	for _, c := range res.Data.Connections {
		for _, k := range userKeys {
			if c.AuthorizedUser == k || c.NKey == k {
				n++
			}
		}
	}
	return n, nil
}

// CheckAuth proves the auth store's shape and checks every row.
func (a *Authority) CheckAuth(ctx context.Context, url string, sp wire.Space) (*authority.Checkup, error) {
	s, nc, err := a.store(ctx, url, sp)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	return s.Check(ctx)
}

// RevokeUserKey revokes the credential issued to userKey: its ledger row moves to revoked with
// reason (taking down the sessions it called, as Revoke does), then the broker refuses it and
// every key the revocation reached. It returns the principal the row names.
//
// The broker is told even when the ledger cannot be: a key with no ledger row (the mesh's own
// bootstrap credentials, a one-minute operator) or a ledger that cannot be read or written still
// has the key refused, and the ledger's error is returned beside it. The rows are scanned, one
// read per row: it is meant for the rare revocation, not for a lookup per request.
func (a *Authority) RevokeUserKey(ctx context.Context, url string, sp wire.Space, userKey, reason string) (string, error) {
	s, nc, err := a.store(ctx, url, sp)
	if err != nil {
		return "", a.pushRevoked(ctx, url, sp, []string{userKey}, fmt.Errorf("revoke %s: %w", userKey, err))
	}
	defer nc.Close()
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
		return r.Principal, a.pushRevoked(ctx, url, sp, keys, err)
	}
	if listErr != nil {
		listErr = fmt.Errorf("revoke %s: %w", userKey, listErr)
	}
	return "", a.pushRevoked(ctx, url, sp, []string{userKey}, listErr)
}
