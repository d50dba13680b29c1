package remotemgr

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The registration proof (SPEC §13.6) binds a remote manager's registration: its space, owner,
// instance, lifecycle, actors and identities, and on activate the contract artifacts it
// registers. Anyone holding those facts computes it, so it proves that a later request speaks of
// the same registration, not who sent it; the person's IdP token does that.

// registrationFacts is the canonical object a registration proof digests.
type registrationFacts struct {
	V               int                          `json:"v"`
	Space           string                       `json:"space"`
	Owner           string                       `json:"owner"`
	InstanceID      string                       `json:"instanceId"`
	LifecycleUID    string                       `json:"lifecycleUid"`
	Actors          meshwire.RemoteManagerActors `json:"actors"`
	Identities      Identities                   `json:"identities"`
	ArtifactDigests []string                     `json:"artifactDigests"`
}

// RegistrationProof returns the registration proof of r for owner: "sha256:<hex>" of the RFC 8785
// canonical form of its facts, with the contract artifacts' digests (sorted) on activate and
// none otherwise.
func RegistrationProof(owner string, r *Request) string {
	digests := []string{}
	if r.Operation == OpActivate {
		digests = slices.Sorted(slices.Values(r.ContractArtifacts))
	}
	raw, _ := json.Marshal(registrationFacts{ // strings always encode
		V: protocolVersion, Space: r.Space, Owner: owner, InstanceID: r.InstanceID, LifecycleUID: r.ManagerLifecycleUID,
		Actors: meshwire.RemoteManagerActorsOf(wire.LifecycleUID(r.InstanceID)), Identities: r.Identities, ArtifactDigests: digests,
	})
	d, err := wire.Digest(raw)
	if err != nil {
		panic("remotemgr: canonicalize marshalled facts: " + err.Error())
	}
	return d
}

// currentFacts is what the current-registration proof binds: the registration at one gate
// revision and process epoch.
type currentFacts struct {
	V                    int                          `json:"v"`
	Kind                 string                       `json:"kind"`
	Space                string                       `json:"space"`
	Owner                string                       `json:"owner"`
	Actor                string                       `json:"actor"`
	InstanceID           string                       `json:"instanceId"`
	LifecycleUID         string                       `json:"lifecycleUid"`
	Actors               meshwire.RemoteManagerActors `json:"actors"`
	Identities           Identities                   `json:"identities"`
	RegistrationRevision int64                        `json:"registrationRevision"`
	ProcessEpoch         int64                        `json:"processEpoch"`
}

// currentProofDomain separates the current-registration proof from every other MAC of the keys.
const currentProofDomain = "cotal/manager-current-registration/v1"

// currentProof returns the current-registration proof of r for owner at the gate's registration
// revision and epoch: an HMAC only the host can make, so a renewal proves that it follows this
// host's activation of this registration at this epoch.
func currentProof(keys *authority.SpaceKeys, owner string, r *Request, revision, epoch int64) string {
	raw, _ := json.Marshal(currentFacts{
		V: protocolVersion, Kind: KindAuthority, Space: r.Space, Owner: owner, Actor: r.Actor, InstanceID: r.InstanceID,
		LifecycleUID: r.ManagerLifecycleUID, Actors: meshwire.RemoteManagerActorsOf(wire.LifecycleUID(r.InstanceID)),
		Identities: r.Identities, RegistrationRevision: revision, ProcessEpoch: epoch,
	})
	c, err := wire.Canonicalize(raw)
	if err != nil {
		panic("remotemgr: canonicalize marshalled facts: " + err.Error())
	}
	return "hmac-sha256:" + hex.EncodeToString(keys.MAC(currentProofDomain, c))
}

// proofEqual compares two proofs in constant time.
func proofEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

// RetirementOpID is a managed agent's retirement operation id: the first 26 hex characters of
// sha256("retire:" + its lifecycle uid), so every retry of one retirement names one operation.
func RetirementOpID(uid wire.LifecycleUID) string {
	sum := sha256.Sum256([]byte("retire:" + string(uid)))
	return hex.EncodeToString(sum[:])[:26]
}
