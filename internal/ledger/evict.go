package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
// connections; Evict returns once the broker's connection list (CONNZ) shows none of them.
func BrokerEvictor(kr *authority.Keyring, url string) Evictor {
	return EvictFunc(func(ctx context.Context, sp wire.Space, userKeys ...string) error {
		return pushRevocations(ctx, kr, url, sp, userKeys)
	})
}

func pushRevocations(ctx context.Context, kr *authority.Keyring, url string, sp wire.Space, userKeys []string) error {
	// The keys are recorded before anything can fail: a push that does not happen now is made by
	// the next one, or by the next start of the broker, which loads the list.
	if err := kr.Revoke(sp, userKeys...); err != nil {
		return err
	}
	// A revocation already in the ledger must reach the broker even when the caller's context
	// is nearly spent.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*evictionWait)
	defer cancel()
	sk, err := kr.Space(sp)
	if err != nil {
		return err
	}
	acct := sk.AccountPublicKey()
	update := jsapi.AccountClaimsUpdate(acct)
	sys, err := kr.MintSystemUser("cotal-revoker", []string{update, jsapi.AccountConnz(acct)}, nil, time.Minute)
	if err != nil {
		return err
	}
	nc, err := dial.As(ctx, url, sys)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Under the keyring's lock, so the last push carries every revocation; the wait for the
	// broker's answer starts once the lock is held.
	err = kr.RevokeAndPush(sp, nil, func(token string) error {
		pctx, cancel := context.WithTimeout(ctx, evictionWait)
		defer cancel()
		rep, err := nc.RequestWithContext(pctx, update, []byte(token))
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
		return nil
	})
	if err != nil {
		return err
	}
	vctx, cancelWait := context.WithTimeout(ctx, evictionWait)
	defer cancelWait()
	for {
		live, err := liveConnections(vctx, nc, acct, userKeys)
		if err != nil {
			return fmt.Errorf("verify the eviction: %w", err)
		}
		if live == 0 {
			return nil
		}
		select {
		case <-vctx.Done():
			return fmt.Errorf("verify the eviction: %d revoked connections still open after %s", live, evictionWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// liveConnections counts the account's connections, as the broker lists them, that authenticated
// as any of the user keys.
func liveConnections(ctx context.Context, nc *nats.Conn, account string, userKeys []string) (int, error) {
	conns, err := connz.List(ctx, nc, account)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range conns {
		if slices.Contains(userKeys, c.AuthorizedUser) || slices.Contains(userKeys, c.NKey) {
			n++
		}
	}
	return n, nil
}
