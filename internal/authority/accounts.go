package authority

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
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

// AccountJWT returns the space's account JWT, signed by the operator. Every user of the space
// connects to it: it lists the space's signing key, which signs every user so the account key
// itself stays off the minting path, and the space's revocations. It holds no JetStream of its
// own: it imports the JetStream API, acknowledgements and every stored subject from the space's
// store account (StoreAccountJWT) under their own names, so a client sees the wire unchanged.
func (k *Keyring) AccountJWT(s *SpaceKeys) (string, error) {
	ac := jwt.NewAccountClaims(s.AccountPublicKey())
	ac.Name = string(s.Space)
	ac.SigningKeys.Add(PublicKey(s.signing))
	store := s.StorePublicKey()
	for _, e := range storeExports(s.Space) {
		// A consumer create shares who made it (the broker then copies the caller's key, JWT
		// name and tags into its request), so the API audit advisory the warden's consumer
		// audit reads names the creator, as it does on an account's own JetStream. Nothing else
		// shares: the shared details carry the caller's whole JWT on every request.
		share := slices.Contains(storeAuditedAPI, string(e.Subject))
		ac.Imports.Add(&jwt.Import{Name: e.Name, Subject: e.Subject, Account: store, Type: e.Type, Share: share})
	}
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

// StoreAccountJWT returns the JWT of the space's store account, signed by the operator. It
// holds the space's streams and buckets within the space's StorageLimits (in operator mode an
// account without JetStream limits has no JetStream at all), and no user connects to it: the
// space's account reaches it only through what it exports. So a reply the broker itself sends
// (a publish acknowledgement, an API answer) goes back to the space's account, where no stream
// captures it: a reply subject aimed at a store can never make the broker write there.
func (k *Keyring) StoreAccountJWT(s *SpaceKeys) (string, error) {
	ac := jwt.NewAccountClaims(s.StorePublicKey())
	ac.Name = string(s.Space) + "-store"
	storage, err := k.StorageLimits(s.Space)
	if err != nil {
		return "", err
	}
	ac.Limits.JetStreamLimits = storage.jetStream()
	for _, e := range storeExports(s.Space) {
		ac.Exports.Add(e)
	}
	tok, err := ac.Encode(k.operator)
	if err != nil {
		return "", fmt.Errorf("encode store account jwt for space %s: %w", s.Space, err)
	}
	return tok, nil
}

// SpaceAccountJWTs returns the JWTs of a space's account and of its store account: what a broker
// serving the space must trust.
func (k *Keyring) SpaceAccountJWTs(s *SpaceKeys) (account, store string, err error) {
	if account, err = k.AccountJWT(s); err != nil {
		return "", "", err
	}
	if store, err = k.StoreAccountJWT(s); err != nil {
		return "", "", err
	}
	return account, store, nil
}

// The JetStream API as the store account serves it. A request whose answer may come in several
// messages (a pull's batch, a batched direct get) is exported streamed; every other request is a
// singleton, whose route back is dropped at its first answer. The two sets never overlap, so no
// request reaches the store twice.
var (
	storeSingletonAPI = []string{
		"$JS.API.INFO", "$JS.API.STREAM.>", "$JS.API.ACCOUNT.>", "$JS.API.META.>", "$JS.API.SERVER.>",
		"$JS.API.CONSUMER.CREATE.>", "$JS.API.CONSUMER.DURABLE.>", "$JS.API.CONSUMER.DELETE.>",
		"$JS.API.CONSUMER.INFO.>", "$JS.API.CONSUMER.LIST.>", "$JS.API.CONSUMER.NAMES.>",
		"$JS.API.CONSUMER.PAUSE.>", "$JS.API.CONSUMER.UNPIN.>", "$JS.API.CONSUMER.LEADER.>",
		"$JS.API.CONSUMER.PEER.>",
		"$JS.ACK.>", "$JS.FC.>",
	}
	storeStreamedAPI = []string{"$JS.API.CONSUMER.MSG.NEXT.>", "$JS.API.DIRECT.GET.>"}
	// storeAuditedAPI are the calls whose caller the broker's API audit advisory must name.
	storeAuditedAPI = []string{"$JS.API.CONSUMER.CREATE.>", "$JS.API.CONSUMER.DURABLE.>"}
)

// storeExports lists what a space's store account exports to the space's account: the
// JetStream API, acknowledgements and flow control, and each subject a stream or bucket of the
// space stores, as services; and everything the store publishes (deliveries to a consumer's
// subject, advisories), as a stream, which the broker routes only where a subscriber asks.
func storeExports(s wire.Space) []*jwt.Export {
	var exports []*jwt.Export
	add := func(subject string, rt jwt.ResponseType) {
		exports = append(exports, &jwt.Export{Name: subject, Subject: jwt.Subject(subject), Type: jwt.Service, ResponseType: rt})
	}
	for _, subject := range storeSingletonAPI {
		add(subject, jwt.ResponseTypeSingleton)
	}
	for _, subject := range storeStreamedAPI {
		add(subject, jwt.ResponseTypeStream)
	}
	for _, subject := range space.StoredSubjects(s) {
		add(subject, jwt.ResponseTypeSingleton)
	}
	return append(exports, &jwt.Export{Name: "deliveries", Subject: ">", Type: jwt.Stream})
}
