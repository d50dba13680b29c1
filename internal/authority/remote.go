package authority

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"

	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/wire"
)

// ManagerGateKey returns the auth-store key of manager instance's serve gate,
// "epgate.manager.<instanceId>", the one key a remote manager's identities may write.
func ManagerGateKey(instance wire.LifecycleUID) string {
	return Endpoint{Name: wire.ManagerEndpoint.Token(), InstanceID: instance}.gateKey()
}

// RegistrationGate returns the gate row a remote manager's executor registers its instance with:
// open at epoch 0, naming serve, the principal the host will issue the serve credential to.
func RegistrationGate(serve wire.Principal, opID string) []byte {
	raw, _ := json.Marshal(EndpointGateRow{ // strings and numbers always encode
		State: GateOpen, Generation: 1, Principal: serve.String(),
		Op: &EndpointGateOp{OpID: opID, Kind: OpActivation},
	})
	return raw
}

// MAC returns the HMAC-SHA256 of msg under a key derived from the space's signing seed for
// domain: a proof only the holder of the space's keys can make or check, never the seed itself.
func (s *SpaceKeys) MAC(domain string, msg []byte) []byte {
	_, raw, err := nkeys.DecodeSeed(mustSeed(s.signing))
	if err != nil {
		panic("authority: decode a loaded signing seed: " + err.Error())
	}
	k := hmac.New(sha256.New, raw)
	k.Write([]byte("cotal proof key v1:" + domain))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write(msg)
	return m.Sum(nil)
}
