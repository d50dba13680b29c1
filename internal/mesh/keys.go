package mesh

import (
	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/wire"
)

// OpenKeyring opens (creating on first use) the minting authority of d: its operator, system
// account and space keys. Whoever can open it can mint any identity in its spaces.
func (d Dir) OpenKeyring() (*authority.Keyring, error) {
	if err := atomicfile.MkdirPrivate(d.Path); err != nil {
		return nil, err
	}
	if d.keyless() {
		return nil, ErrKeyless
	}
	return authority.OpenKeyring(d.AuthDir())
}

// trust returns what a broker serving spaces must trust, creating missing space keys.
func trust(kr *authority.Keyring, spaces []wire.Space, userAuth bool) (broker.Trust, error) {
	op, err := kr.OperatorJWT()
	if err != nil {
		return broker.Trust{}, err
	}
	sys, err := kr.SystemAccountJWT()
	if err != nil {
		return broker.Trust{}, err
	}
	t := broker.Trust{OperatorJWT: op, SystemAccount: sys}
	for _, s := range spaces {
		sk, err := kr.Space(s)
		if err != nil {
			return broker.Trust{}, err
		}
		acct, store, err := kr.SpaceAccountJWTs(sk)
		if err != nil {
			return broker.Trust{}, err
		}
		t.Accounts = append(t.Accounts, acct, store)
		if !userAuth {
			continue
		}
		// User-auth mode: the space's auth account, whose callout admits people's connects.
		ck, err := kr.Callout(s)
		if err != nil {
			return broker.Trust{}, err
		}
		auth, err := kr.AuthAccountJWT(ck, sk)
		if err != nil {
			return broker.Trust{}, err
		}
		t.Accounts = append(t.Accounts, auth)
	}
	return t, nil
}
