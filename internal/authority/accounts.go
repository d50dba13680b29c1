package authority

import (
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
)

// systemAccountName is the system account's JWT name.
const systemAccountName = "SYS"

// OperatorJWT returns the operator JWT, self-signed, naming the system account.
func (k *Keyring) OperatorJWT() (string, error) {
	oc := jwt.NewOperatorClaims(k.OperatorPublicKey())
	oc.Name = "cotal"
	oc.SystemAccount = k.SystemAccountPublicKey()
	tok, err := oc.Encode(k.operator)
	if err != nil {
		return "", fmt.Errorf("encode operator jwt: %w", err)
	}
	return tok, nil
}

// SystemAccountJWT returns the system account's JWT, signed by the operator.
func (k *Keyring) SystemAccountJWT() (string, error) {
	ac := jwt.NewAccountClaims(k.SystemAccountPublicKey())
	ac.Name = systemAccountName
	tok, err := ac.Encode(k.operator)
	if err != nil {
		return "", fmt.Errorf("encode system account jwt: %w", err)
	}
	return tok, nil
}

// AccountJWT returns the space's account JWT, signed by the operator. It grants JetStream within
// the space's StorageLimits (in operator mode an account without JetStream limits has no
// JetStream at all) and lists the space's signing key, which signs every user of the space so the
// account key itself stays off the minting path.
func (k *Keyring) AccountJWT(s *SpaceKeys) (string, error) {
	ac := jwt.NewAccountClaims(s.AccountPublicKey())
	ac.Name = string(s.Space)
	storage, err := k.StorageLimits(s.Space)
	if err != nil {
		return "", err
	}
	ac.Limits.JetStreamLimits = storage.jetStream()
	ac.SigningKeys.Add(PublicKey(s.signing))
	revoked, err := k.Revocations(s.Space)
	if err != nil {
		return "", err
	}
	for user, at := range revoked {
		ac.RevokeAt(user, time.Unix(at, 0))
	}
	tok, err := ac.Encode(k.operator)
	if err != nil {
		return "", fmt.Errorf("encode account jwt for space %s: %w", s.Space, err)
	}
	return tok, nil
}
