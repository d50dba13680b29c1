package authority

import (
	"fmt"
	"slices"
	"time"

	"github.com/gocotal/cotal/wire"
)

// Profile names a credential profile: the closed set of permission shapes the authority mints.
// A user JWT's name is its profile.
type Profile string

// The profiles. Every one is a default-deny allow-list of exactly what its holder does; there is
// no allow-all profile.
const (
	// ProfileAgent is an agent: messaging as its own principal within its ACLs.
	ProfileAgent Profile = "agent"
	// ProfileObserver reads channels, history, presence and the registry; no direct messages.
	ProfileObserver Profile = "observer"
	// ProfileAdmin is an observer that also reads direct messages and tasks, never the ep rails.
	ProfileAdmin Profile = "admin"
	// ProfileSupervisor is the manager daemon: its lease, its presence, the manager liveness plane.
	ProfileSupervisor Profile = "supervisor"
	// ProfileDelivery is the delivery daemon: fan-out, re-authorisation, the delivery planes.
	ProfileDelivery Profile = "delivery"
	// ProfileProvisioner creates a space's streams, buckets and durables.
	ProfileProvisioner Profile = "provisioner"
	// ProfileDeprovisioner tears down one lifecycle's durables and rows, pinned to it by name.
	ProfileDeprovisioner Profile = "deprovisioner"
	// ProfileOperator is the human CLI's one-shot send credential.
	ProfileOperator Profile = "operator"
	// ProfileProbe only proves that a credential connects: it may do nothing.
	ProfileProbe Profile = "probe"
	// ProfileChannelWriter edits the channel registry.
	ProfileChannelWriter Profile = "channel-writer"
	// ProfilePurger purges channel and direct-message history.
	ProfilePurger Profile = "purger"
	// ProfileTeardown deletes a space's streams and buckets.
	ProfileTeardown Profile = "teardown"
	// ProfileLedger is the authority's own one-shot credential on the auth store: lifecycle
	// heads, gates and credential rows. It is never handed out.
	ProfileLedger Profile = "ledger"
	// ProfileSessionCaller is the caller half of a session (SPEC §13.6): publish on the session's
	// in rail, read its out rail, nothing else.
	ProfileSessionCaller Profile = "session-caller"
	// ProfileSessionServing is the serving half: read the in rail, publish on the out rail.
	ProfileSessionServing Profile = "session-serving"
	// ProfileRunOperator serves one run-surface call: it reads the run records and the run
	// admissions and replays one run's journal, read-only, for a minute.
	ProfileRunOperator Profile = "run-operator"
	// ProfileWarden is the mesh's integrity warden: it audits every JetStream API call of the
	// space, deletes consumers that break their grant's intent, and quarantines stored messages
	// and bucket rows that no legitimate writer produced. The mesh mints it for itself; it is
	// never handed out.
	ProfileWarden Profile = "warden"
	// ProfileMembership writes the membership feed (SPEC §8, cotal_membership_<space>) for the
	// dashboards, reading the durable memberships it reports. The active delivery daemon holds
	// it; it is never handed out.
	ProfileMembership Profile = "membership-rw"
	// ProfileControlAdmin is the operator's control instrument, the CLI's one-shot credential for
	// the endpoint commands (`cotal ps` and the others): it calls any endpoint of the space in
	// every mode as its own principal and a fresh instrument lifecycle (Grant.Instrument), and
	// reads the contract artifacts and the service registry.
	ProfileControlAdmin Profile = "control-caller-admin"
	// ProfileRemoteManager is a remote manager's supervisor or executor identity (SPEC §13.1):
	// both may write the instance's serve gate, which registers it; only the supervisor
	// (meshwire.RemoteManagerActors.Supervisor) holds the instance's lease and answers the manager
	// liveness plane. Grant.Serve names the instance. The auth service issues it; it is never
	// handed out by name.
	ProfileRemoteManager Profile = "remote-manager"
	// ProfileEndpointServe serves one endpoint instance at one epoch (Grant.Serve) and nothing
	// else: a remote manager's serve identity, issued through the instance's gate.
	ProfileEndpointServe Profile = "endpoint-serve"
	// ProfileGoalWriter commits the goals of one endpoint (SPEC §13.9, the goal-writer row): a
	// remote manager's goal identity binds each goal its serve identity accepts, indexes it,
	// writes its terminal facts and records, and reads its own issuance gate before the first
	// terminal, on a connection apart from the serve credential. Grant.Serve names the endpoint
	// (and the instance whose gate it reads); it is never handed out by name.
	ProfileGoalWriter Profile = "goal-writer"
	// ProfileSessionLedger keeps a manager's session ledger: the rows of the sessions it serves,
	// in the dedicated sessions bucket, and no session rail of any shape. A remote manager's
	// session identity holds it; it is never handed out by name.
	ProfileSessionLedger Profile = "session-ledger"
	// ProfileTransferReader reads and removes what was carried to one manager instance: the
	// instance's own transfer object store (Grant.Serve names the manager instance), once per
	// transcript-receive or sweep. It is never handed out by name.
	ProfileTransferReader Profile = "transfer-reader"
	// ProfileRetirementRequester asks the auth endpoint to retire exactly one lifecycle
	// (Grant.Target) as its caller (Grant.Principal and Grant.LifecycleUID): request and reply
	// only, for one despawn. It holds no executing right and is never handed out by name.
	ProfileRetirementRequester Profile = "retirement-requester"
	// ProfileRunDriver drives one workflow run for one takeover (SPEC §14.6): it appends the run's
	// journal, replays it through the takeover's own durable and writes the run's own records.
	// Grant.Run names the run and takeover, Grant.Serve the hosting endpoint instance. It is never
	// handed out by name.
	ProfileRunDriver Profile = "run-driver"
	// ProfileRunMediator is the trusted host side of one run attempt (SPEC §14.8): the
	// leader-served reads of the run's admission and records, and the run's effects in channels,
	// on the checkpoint plane and on the hosting endpoint as the run's own caller (Grant.Principal
	// and Grant.LifecycleUID). It is never returned to the driver and never handed out by name.
	ProfileRunMediator Profile = "run-mediator"
	// ProfileRunAdmitter writes one run's admission record and its revocation marker (SPEC
	// §14.8), create-only, and nothing else: the admitting manager mints it per run, the
	// operator's instrument to revoke one. Grant.Run names the run, Grant.Serve the endpoint
	// instance it is admitted on. It lives a minute and is never handed out by name.
	ProfileRunAdmitter Profile = "run-admitter"
	// ProfileManagerCaller is a person's or managed agent's manager-caller view in user-auth
	// mode (SPEC §9, §10): the manager endpoint of one instance (Grant.Serve names it) on that
	// instance's own rail, as its own principal and lifecycle: describe, the read commands and,
	// with the spawn capability, the spawn commands of its own owner. The auth callout mints it
	// for a bearer of that view; it is never handed out by name.
	ProfileManagerCaller Profile = "manager-caller"
	// ProfileDeployer is a person's deployer view in user-auth mode (SPEC §10): the manifest
	// deploy of their own team, as their own principal and lifecycle. It reads the roster, the
	// channel registry, the membership feed and the leases, and calls the manager's read
	// commands, its persona commands, spawn and launch on the class rail (whichever instance the
	// queue picks) and ps on every instance; it never targets an existing agent. The auth callout mints it for a bearer of that view, whose row holds spawn;
	// it is never handed out by name.
	ProfileDeployer Profile = "deployer"
)

// Profiles lists every profile.
var Profiles = []Profile{
	ProfileAgent, ProfileObserver, ProfileAdmin, ProfileSupervisor, ProfileDelivery, ProfileProvisioner,
	ProfileDeprovisioner, ProfileOperator, ProfileProbe, ProfileChannelWriter, ProfilePurger, ProfileTeardown,
	ProfileLedger, ProfileSessionCaller, ProfileSessionServing, ProfileRunOperator, ProfileWarden,
	ProfileMembership, ProfileControlAdmin, ProfileRemoteManager, ProfileEndpointServe,
	ProfileGoalWriter, ProfileSessionLedger, ProfileTransferReader, ProfileRetirementRequester,
	ProfileRunDriver, ProfileRunMediator, ProfileRunAdmitter, ProfileManagerCaller, ProfileDeployer,
}

// Handed lists the profiles an operator may mint for a process by name alone. The others are the
// authority's own (ledger) or need coordinates a name cannot give: a deprovisioner's target, a
// session's rails, a run operator's run.
var Handed = []Profile{
	ProfileAgent, ProfileObserver, ProfileAdmin, ProfileSupervisor, ProfileDelivery, ProfileProvisioner,
	ProfileOperator, ProfileProbe, ProfileChannelWriter, ProfilePurger, ProfileTeardown,
	ProfileControlAdmin,
}

// ParseProfile returns s as a Profile, or a *wire.ValidationError listing the profiles.
func ParseProfile(s string) (Profile, error) {
	if p := Profile(s); slices.Contains(Profiles, p) {
		return p, nil
	}
	return "", &wire.ValidationError{Field: "profile", Value: s, Rule: fmt.Sprintf("must be one of %q", Profiles)}
}

// Credential lifetimes. A daemon credential lasts a day and is renewed; a one-shot CLI credential
// lasts minutes, enough for its one command; an agent's lasts until its lifecycle is retired
// (revocation, not expiry, ends it) unless asked otherwise.
const (
	DaemonLifetime  = 24 * time.Hour
	OneShotLifetime = 5 * time.Minute
	// ProbeLifetime is shorter still: a probe only proves a connect.
	ProbeLifetime = time.Minute
	// RunOperatorLifetime covers the one call a run operator serves, or the one write a run
	// admitter makes.
	RunOperatorLifetime = time.Minute
)

// DefaultLifetime returns how long a credential of p lives when no expiry is asked for; zero
// means it does not expire.
func (p Profile) DefaultLifetime() time.Duration {
	switch p {
	case ProfileAgent, ProfileObserver, ProfileAdmin:
		return 0
	case ProfileSupervisor, ProfileDelivery, ProfileWarden, ProfileMembership, ProfileRemoteManager, ProfileEndpointServe,
		ProfileGoalWriter, ProfileSessionLedger, ProfileRunDriver, ProfileRunMediator:
		return DaemonLifetime
	case ProfileProbe:
		return ProbeLifetime
	case ProfileRunOperator, ProfileRunAdmitter:
		return RunOperatorLifetime
	}
	return OneShotLifetime
}

// Daemon reports whether p is a daemon's profile: its credential is held by a long-running
// process and renewed before it expires.
func (p Profile) Daemon() bool {
	return p == ProfileSupervisor || p == ProfileDelivery || p == ProfileWarden || p == ProfileMembership
}

// Per-credential limits the broker enforces on the profiles held outside the mesh's own processes
// (an agent, a person's bearer, a session's caller half, a manager's or deployer's caller view): a
// connection past MaxSubscriptions is refused the next subscribe, and a publish over MaxPayload is
// refused, whatever the broker's own max_payload. One credential's subscriptions cannot then
// swell the broker for everyone (a red team held 200,000 on one agent credential).
const (
	MaxSubscriptions = 4096
	MaxPayload       = wire.DefaultMaxPayload
)

// bounded reports whether p's credentials carry MaxSubscriptions and MaxPayload.
func (p Profile) bounded() bool {
	switch p {
	case ProfileAgent, ProfileSessionCaller, ProfileManagerCaller, ProfileDeployer, ProfileRetirementRequester, ProfileObserver:
		return true
	}
	return false
}

// instrument reports whether p's rows pin a one-shot instrument lifecycle of their own
// (Grant.Instrument), fresh at every mint.
func (p Profile) instrument() bool { return p == ProfileControlAdmin }

// needsLifecycle reports whether p's rows name the holder's lifecycle.
func (p Profile) needsLifecycle() bool {
	return p == ProfileAgent || p == ProfileDeprovisioner || p.callsAs()
}

// callsAs reports whether p's rows pin a caller lifecycle of Grant.Principal and
// Grant.LifecycleUID on the endpoint rails besides an agent's.
func (p Profile) callsAs() bool {
	return p == ProfileRetirementRequester || p == ProfileRunMediator || p == ProfileManagerCaller || p == ProfileDeployer
}
