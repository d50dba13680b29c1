package authority

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// User-auth mode gives each space a second account beside its data account: the auth account
// AUTH_<space>, whose users are only the callout service and the shared sentinel every client
// presents. The broker hands each sentinel connection to the callout service, which binds it into
// the data account (SPEC §10).

// calloutResponseTTL is how long the callout user may answer a request it was handed. The broker
// waits far less (its auth timeout); the bound only lets it forget the reply subjects of requests
// that were dropped without an answer.
const calloutResponseTTL = time.Minute

// CalloutKeys are one space's auth-callout keys: the auth account, its callout and sentinel
// users, and the curve key requests are sealed to. Whoever holds the account or curve key can
// admit any connection to the space.
type CalloutKeys struct {
	Space    wire.Space
	account  nkeys.KeyPair
	callout  nkeys.KeyPair
	sentinel nkeys.KeyPair
	xkey     nkeys.KeyPair
	// accountPub is the auth account's public key, derived once.
	accountPub string
}

// Callout loads the auth-callout keys of space, creating any that are missing. They live beside
// the space's other keys, under the same rules: 0600 files created only if absent, and a file that
// exists but does not hold a seed of the right kind is a *KeyFileError and is never replaced. The
// space name must pass wire.ParseSpace. Each call reads the files anew.
func (k *Keyring) Callout(space wire.Space) (*CalloutKeys, error) {
	if _, err := wire.ParseSpace(string(space)); err != nil {
		return nil, err
	}
	stem := filepath.Join(k.dir, calloutStem(space))
	ck := &CalloutKeys{Space: space}
	var err error
	if ck.account, err = loadOrCreate(stem+".nk", nkeys.PrefixByteAccount); err != nil {
		return nil, err
	}
	if ck.callout, err = loadOrCreate(stem+".callout.nk", nkeys.PrefixByteUser); err != nil {
		return nil, err
	}
	if ck.sentinel, err = loadOrCreate(stem+".sentinel.nk", nkeys.PrefixByteUser); err != nil {
		return nil, err
	}
	if ck.xkey, err = loadOrCreate(stem+".xkey.nk", nkeys.PrefixByteCurve); err != nil {
		return nil, err
	}
	ck.accountPub = PublicKey(ck.account)
	return ck, nil
}

// calloutStem is the file name stem of space's callout keys in a keyring directory.
func calloutStem(space wire.Space) string { return "space." + string(space) + ".auth" }

// HasCallout reports whether the keyring holds space's auth-callout keys: whether the space was
// ever served in user-auth mode.
func (k *Keyring) HasCallout(space wire.Space) bool {
	_, err := os.Stat(filepath.Join(k.dir, calloutStem(space)+".nk"))
	return err == nil
}

// calloutSeeds returns space's callout keys as seeds, for another authority node.
func (k *Keyring) calloutSeeds(space wire.Space) (*CalloutSeeds, error) {
	ck, err := k.Callout(space)
	if err != nil {
		return nil, err
	}
	var out [4]string
	for i, kp := range []nkeys.KeyPair{ck.account, ck.callout, ck.sentinel, ck.xkey} {
		seed, err := kp.Seed()
		if err != nil {
			return nil, err
		}
		out[i] = string(seed)
	}
	return &CalloutSeeds{Account: out[0], Callout: out[1], Sentinel: out[2], XKey: out[3]}, nil
}

// AccountPublicKey returns the auth account's public key, its NATS account name.
func (c *CalloutKeys) AccountPublicKey() string { return c.accountPub }

// CalloutPublicKey returns the callout user's public key, the account's one auth user.
func (c *CalloutKeys) CalloutPublicKey() string { return PublicKey(c.callout) }

// SentinelPublicKey returns the sentinel user's public key.
func (c *CalloutKeys) SentinelPublicKey() string { return PublicKey(c.sentinel) }

// XKeyPublicKey returns the public curve key the broker seals authorization requests to.
func (c *CalloutKeys) XKeyPublicKey() string { return PublicKey(c.xkey) }

// Account returns the auth account's key pair, which signs the callout's responses. It is
// secret: it admits any connection to the space.
func (c *CalloutKeys) Account() nkeys.KeyPair { return c.account }

// XKey returns the curve key pair that opens requests and seals responses. It is secret.
func (c *CalloutKeys) XKey() nkeys.KeyPair { return c.xkey }

// LogValue implements slog.LogValuer with the public keys only.
func (c *CalloutKeys) LogValue() slog.Value {
	return slog.GroupValue(slog.String("space", string(c.Space)), slog.String("account", c.accountPub))
}

// authAccountName is the auth account's JWT name.
func authAccountName(space wire.Space) string { return "AUTH_" + string(space) }

// AuthAccountJWT returns the JWT of c's auth account, signed by the operator. It enables the
// auth callout: the callout user is its one auth user, data's account is the only account the
// callout may place a connection in, and requests are sealed to c's curve key. It grants no
// JetStream. data must be the keys of c's own space.
func (k *Keyring) AuthAccountJWT(c *CalloutKeys, data *SpaceKeys) (string, error) {
	if c.Space != data.Space {
		return "", fmt.Errorf("auth account jwt for space %s: data account keys are of space %s", c.Space, data.Space)
	}
	ac := jwt.NewAccountClaims(c.accountPub)
	ac.Name = authAccountName(c.Space)
	ac.EnableExternalAuthorization(c.CalloutPublicKey())
	ac.Authorization.AllowedAccounts.Add(data.AccountPublicKey())
	ac.Authorization.XKey = c.XKeyPublicKey()
	tok, err := ac.Encode(k.operator)
	if err != nil {
		return "", fmt.Errorf("encode auth account jwt for space %s: %w", c.Space, err)
	}
	return tok, nil
}

// CalloutCreds returns the creds file of the callout user, signed by the auth account. It may
// only queue-subscribe to the authorization requests in the callout's queue group and answer
// each request it is handed, once; it may publish nothing else.
func (c *CalloutKeys) CalloutCreds() ([]byte, error) {
	uc := jwt.NewUserClaims(c.CalloutPublicKey())
	uc.Name = "auth-callout"
	uc.Sub.Allow.Add(meshwire.AuthCalloutSubject + " " + meshwire.AuthCalloutQueue)
	uc.Pub.Deny.Add(">")
	// Answers go to the server's reply subject, which a response permission opens for one
	// message; the deny above does not close it.
	uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: calloutResponseTTL}
	return c.creds(uc, c.callout, "callout")
}

// SentinelCreds returns the creds file of the sentinel user, signed by the auth account: the
// shared credential every client presents with its bearer. It may publish and subscribe to
// nothing; the broker never lets it connect as itself, since the callout replaces it.
func (c *CalloutKeys) SentinelCreds() ([]byte, error) {
	uc := jwt.NewUserClaims(c.SentinelPublicKey())
	uc.Name = "sentinel"
	uc.Pub.Deny.Add(">")
	uc.Sub.Deny.Add(">")
	return c.creds(uc, c.sentinel, "sentinel")
}

// creds signs uc with the auth account and formats it with user's seed.
func (c *CalloutKeys) creds(uc *jwt.UserClaims, user nkeys.KeyPair, what string) ([]byte, error) {
	tok, err := uc.Encode(c.account)
	if err != nil {
		return nil, fmt.Errorf("encode %s jwt for space %s: %w", what, c.Space, err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, fmt.Errorf("encode %s seed for space %s: %w", what, c.Space, err)
	}
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		return nil, fmt.Errorf("format %s creds for space %s: %w", what, c.Space, err)
	}
	return creds, nil
}
