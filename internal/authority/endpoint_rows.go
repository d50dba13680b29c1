package authority

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The rows of the endpoint surface (SPEC §13.9): the agent's baseline caller rows and its
// capabilities, the operator's control instrument, and a serving instance's rows.

// The manager commands the agent rows name, as the reference's manager contract (rev 17) spells
// them.
const (
	cmdStatus        = "status"
	cmdPs            = "ps"
	cmdStop          = "stop"
	cmdSpawn         = "spawn"
	cmdDespawn       = "despawn"
	cmdAttach        = "attach"
	cmdDefinePersona = "define-persona"
	cmdInspect       = "inspect"
	cmdListPersonas  = "list-personas"
	cmdShowPersona   = "show-persona"
	cmdModels        = "models"
	cmdLaunch        = "launch"
	cmdTurnPending   = "turn-pending"
	cmdTurnYield     = "turn-yield"
	cmdRunStart      = "run-start"
	cmdRunResume     = "run-resume"
	cmdRunAnswer     = "run-answer"
	cmdRunStatus     = "run-status"
	cmdRunPs         = "run-ps"
)

// CapabilitySpawn lets an agent spawn agents through the manager and follow their goals: the
// reference's spawn capability.
const CapabilitySpawn = "spawn"

// CapabilityRun lets an agent start, resume and read workflow runs through the manager, and
// answer their checkpoints: the reference's run capability.
const CapabilityRun = "run"

// KnownCapabilities is the closed set of agent capabilities.
var KnownCapabilities = []string{CapabilitySpawn, CapabilityRun}

// TagCapability starts the JWT tag naming each capability an agent credential carries.
const TagCapability = "capability:"

// ValidateCapability returns a *wire.ValidationError unless c is one of KnownCapabilities.
func ValidateCapability(c string) error {
	if !slices.Contains(KnownCapabilities, c) {
		return &wire.ValidationError{Field: "capability", Value: c, Rule: fmt.Sprintf("must be one of %q", KnownCapabilities)}
	}
	return nil
}

// ServeRows names what one serving instance of an endpoint holds: the request rails of each of
// its Commands (describe is always added), and its reply, event, fact, contract and registry
// rows, with the epoch pinned on the reply and event rails.
type ServeRows struct {
	// Endpoint is the served endpoint; its token is the class rail's queue group.
	Endpoint wire.EndpointName
	// Instance is the serving instance's id, pinned on its instance rail, replies and events.
	Instance wire.LifecycleUID
	// Epoch is the instance's serve epoch, from its gate: replies and events carry it.
	Epoch int64
	// Commands are the served commands, each subscribed on its own rows (never a cross-command
	// '>'); describe is served whether listed or not.
	Commands []string
}

// Validate checks the endpoint name, the instance id, the epoch and every command's grammar; it
// returns a *wire.ValidationError.
func (s *ServeRows) Validate() error {
	if _, err := wire.ParseEndpointName(string(s.Endpoint)); err != nil {
		return err
	}
	if _, err := wire.ParseLifecycleUID(string(s.Instance)); err != nil {
		return fmt.Errorf("serve instance: %w", err)
	}
	if s.Epoch < 0 {
		return &wire.ValidationError{Field: "epoch", Value: strconv.FormatInt(s.Epoch, 10), Rule: "must not be negative"}
	}
	for _, c := range s.Commands {
		if err := wire.ValidateCommand(c); err != nil {
			return err
		}
	}
	return nil
}

// commands returns describe and the served commands, each once, describe first.
func (s *ServeRows) commands() []string {
	out := []string{wire.CommandDescribe}
	for _, c := range s.Commands {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// validateEndpoint checks the endpoint fields of g: capabilities only on an agent or a manager
// caller, and each known, an instrument UID on a control instrument, an endpoint instance (Serve)
// only on a profile that serves one or acts for one, and there required except on a supervisor.
func (g *Grant) validateEndpoint(profile Profile) error {
	if len(g.Capabilities) > 0 && profile != ProfileAgent && profile != ProfileManagerCaller {
		return &wire.ValidationError{Field: "capabilities", Value: fmt.Sprint(g.Capabilities), Rule: "only an agent or a manager caller carries capabilities"}
	}
	for _, c := range g.Capabilities {
		if err := ValidateCapability(c); err != nil {
			return err
		}
	}
	if g.Generation != "" {
		if profile != ProfileAgent {
			return &wire.ValidationError{Field: "generation", Value: string(profile), Rule: "only an agent carries an issued generation"}
		}
		if err := wire.ValidateGeneration(g.Generation); err != nil {
			return err
		}
	}
	if profile == ProfileControlAdmin {
		if _, err := wire.ParseLifecycleUID(string(g.Instrument)); err != nil {
			return fmt.Errorf("the %s profile names its instrument uid: %w", profile, err)
		}
	}
	pinned := profile.serves() || profile.namesInstance()
	switch {
	case g.Serve != nil && !pinned:
		return &wire.ValidationError{Field: "serve", Value: string(profile), Rule: "only a profile that serves or acts for an endpoint instance names one"}
	case g.Serve == nil && profile != ProfileSupervisor && pinned:
		return &wire.ValidationError{Field: "serve", Value: string(profile), Rule: "names the endpoint instance it serves or acts for"}
	case g.Serve != nil:
		return g.Serve.Validate()
	}
	return nil
}

// contractRead is the Direct Get of the contract stream, its subject tail fully qualified (SPEC
// §13.9): every artifact, content-addressed and public within the space.
func (r rowsFor) contractRead() string {
	return jsapi.DirectGet + meshwire.ContractStream(r.s) + "." + r.s.KindAll(wire.KindEpc)
}

// agentEndpoint is an agent's caller rows on the endpoint rails, as the reference grants them
// (endpoint-grants.ts): describe any endpoint on the class rail, fetch the contract artifacts,
// stop itself through the manager, hear the replies to its own requests; and the rows of each
// capability it carries. The reference's baseline also calls the delivery endpoint's join,
// leave and list; here the delivery daemon still serves them on the ctl.delivery rail, which the
// agent holds, so those three rows are not granted.
func (r rowsFor) agentEndpoint() (pub, sub []string) {
	l, mgr := r.lifecycle(), wire.ManagerEndpoint.Token()
	one := func(route ...string) string { return meshwire.RequestGrant(r.s, l, "", wire.AddressOne, route...) }
	pub = []string{
		one("*", wire.CommandDescribe),
		r.contractRead(),
		one(mgr, cmdStop, string(wire.ModeSelf)),
		// A run's answer in the self form: the manager takes it only from a caller it relayed
		// the question to, or one holding the run capability.
		one(mgr, cmdRunAnswer, string(wire.ModeSelf)),
		// Its own turns: pulling the pending ones and yielding each.
		one(mgr, cmdTurnPending, string(wire.ModeSelf)),
		one(mgr, cmdTurnYield, string(wire.ModeSelf)),
	}
	sub = []string{r.s.ReplyReadGrant(l, "")}
	if g := r.Generation; g != "" {
		// The versioned rail: the baseline's describe, self-stop and answer, and the replies.
		v1 := func(route ...string) string { return meshwire.RequestGrant(r.s, l, g, wire.AddressOne, route...) }
		pub = append(pub, v1("*", wire.CommandDescribe), v1(mgr, cmdStop, string(wire.ModeSelf)), v1(mgr, cmdRunAnswer, string(wire.ModeSelf)),
			v1(mgr, cmdTurnPending, string(wire.ModeSelf)), v1(mgr, cmdTurnYield, string(wire.ModeSelf)))
		sub = append(sub, r.s.ReplyReadGrant(l, g))
	}
	if slices.Contains(r.Capabilities, CapabilityRun) {
		for _, c := range []string{cmdRunStart, cmdRunResume, cmdRunStatus, cmdRunPs} {
			pub = append(pub, one(mgr, c))
		}
	}
	if slices.Contains(r.Capabilities, CapabilitySpawn) {
		o := r.Principal.Owner()
		pub = append(pub,
			one(mgr, cmdSpawn),
			one(mgr, cmdDespawn, string(wire.ModeOwner), o),
			one(mgr, cmdAttach, string(wire.ModeOwner), o),
			// The reserved cancel of its own spawn goals, on the accepting instance's rail.
			meshwire.RequestGrant(r.s, l, "", wire.AddressInst, mgr, "*", wire.CommandCancel),
		)
		for _, c := range []string{cmdDefinePersona, cmdInspect, cmdListPersonas, cmdShowPersona} {
			pub = append(pub, one(mgr, c))
		}
		sub = append(sub, r.s.GoalProgressFilter(wire.ManagerEndpoint, l))
	}
	return pub, sub
}

// managerCaller is the manager-caller view (SPEC §9: "only ep.inst.manager.<managerInstanceId>.
// <command>", with describe, its replies and its inbox): the one manager instance Grant.Serve
// names, on that instance's rail only (never the class or scatter rail, so no other manager hears
// it), as the holder's own lifecycle. It describes the instance, fetches the contract artifacts
// and asks status, ps and inspect; with the spawn capability it also spawns, despawns and attaches
// within its own owner, cancels its own goals there and follows them. It holds no JetStream row
// beyond the contract read: the view reads no stream, bucket or registry.
func (r rowsFor) managerCaller() Permissions {
	l, o := r.lifecycle(), r.Principal.Owner()
	on := func(route ...string) string {
		return meshwire.RequestGrant(r.s, l, "", wire.AddressInst, append([]string{wire.ManagerEndpoint.Token(), string(r.Serve.Instance)}, route...)...)
	}
	pub := []string{on(wire.CommandDescribe), r.contractRead(), on(cmdStatus), on(cmdPs), on(cmdInspect)}
	sub := []string{r.s.ReplyReadGrant(l, ""), r.inbox()}
	if slices.Contains(r.Capabilities, CapabilitySpawn) {
		pub = append(pub, on(cmdSpawn), on(cmdDespawn, string(wire.ModeOwner), o), on(cmdAttach, string(wire.ModeOwner), o), on(wire.CommandCancel))
		sub = append(sub, r.s.GoalProgressFilter(wire.ManagerEndpoint, l))
	}
	return Permissions{PubAllow: pub, SubAllow: sub}
}

// deployer is the deployer view (SPEC §10; the reference's privileged control tier): a
// person's manifest deploy of their own team. One connection reads the live state a deploy plans
// against (the roster, the channel registry and the membership feed, with watches; the manager
// leases and the delivery lease, point reads only) and calls, untargeted and as the holder's own
// lifecycle, the manager's read commands (status, ps on one or every instance, inspect, models),
// its persona commands, spawn and launch; it follows its own goals' progress. It holds no
// targeted command (no despawn, attach, input or stop of anyone), no write of any bucket and no
// message rail: a deploy's reach is the spawn family's, and its containment is the bearer's
// lifetime. Like the reference's tier it holds no cancel row: a deploy that must stop an agent
// it started asks for a view that may despawn.
func (r rowsFor) deployer() Permissions {
	l, mgr := r.lifecycle(), wire.ManagerEndpoint.Token()
	one := func(cmd string) string { return meshwire.RequestGrant(r.s, l, "", wire.AddressOne, mgr, cmd) }
	pub := []string{jsapi.Info, jsapi.FlowControl}
	for _, b := range []wire.Bucket{r.s.PresenceBucket(), r.s.ChannelsBucket(), meshwire.MembershipBucket(r.s)} {
		st := b.Stream()
		pub = append(pub, jsapi.StreamInfo+st, jsapi.MsgGet+st, directGet(b),
			watchCreate(b), jsapi.ConsumerInfo+st+".>", jsapi.ConsumerDelete+st+".>")
	}
	for _, b := range []wire.Bucket{meshwire.ManagerBucket(r.s), meshwire.DeliveryBucket(r.s)} {
		pub = append(pub, jsapi.StreamInfo+b.Stream(), jsapi.MsgGet+b.Stream(), directGet(b))
	}
	pub = append(pub,
		meshwire.RequestGrant(r.s, l, "", wire.AddressOne, "*", wire.CommandDescribe), r.contractRead(),
		meshwire.RequestGrant(r.s, l, "", wire.AddressAll, mgr, cmdPs),
	)
	for _, c := range []string{cmdStatus, cmdPs, cmdInspect, cmdModels, cmdListPersonas, cmdShowPersona, cmdSpawn, cmdDefinePersona, cmdLaunch} {
		pub = append(pub, one(c))
	}
	sub := []string{r.inbox(), r.s.ReplyReadGrant(l, ""), r.s.GoalProgressFilter(wire.ManagerEndpoint, l)}
	return Permissions{PubAllow: pub, SubAllow: sub}
}

// controlShapes are the request forms of the control instrument: per addressing, how many route
// tokens it may fill. On the class and scatter rails, <endpoint>.<command> then nothing (an
// untargeted command), the mode alone (self), the mode and one target (owner, any, child,
// ledger) or the mode and three (handle, exact); the inst rail adds the instance token.
var controlShapes = []struct {
	address wire.Addressing
	tokens  []int
}{
	{wire.AddressOne, []int{2, 3, 4, 6}},
	{wire.AddressAll, []int{2, 3, 4, 6}},
	{wire.AddressInst, []int{3, 4, 5, 7}},
}

// stars returns n "*" tokens.
func stars(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "*"
	}
	return out
}

// controlAdmin is the operator's control instrument (`cotal ps` and the other endpoint commands
// of the CLI): it calls any command of any endpoint of the space, in every mode, as its own
// principal and instrument lifecycle, on the legacy ep rail only (it is a legacy credential, with
// no generation); it hears its own replies and its own goals' progress; and it reads the contract
// artifacts and the service registry (an ordered watch pinned to svc.>, the point reads of the
// records bucket), so it can resolve an endpoint and freeze a scatter's expected set.
func (r rowsFor) controlAdmin() Permissions {
	c := wire.Lifecycle{Principal: r.Principal, UID: r.Instrument}
	var pub []string
	for _, sh := range controlShapes {
		for _, n := range sh.tokens {
			pub = append(pub, meshwire.RequestGrant(r.s, c, "", sh.address, stars(n)...))
		}
	}
	records := meshwire.RecordsBucket(r.s)
	st := records.Stream()
	pub = append(pub,
		r.contractRead(),
		jsapi.Info, jsapi.StreamInfo+st, jsapi.MsgGet+st,
		jsapi.ConsumerCreate+st+".*."+records.Subject(meshwire.ServiceRegistryKeys()), jsapi.ConsumerInfo+st+".>", jsapi.ConsumerDelete+st+".>",
		jsapi.FlowControl,
	)
	// "*" as the endpoint token: the progress of its own goals, from any endpoint's incarnation.
	sub := []string{r.inbox(), r.s.ReplyReadGrant(c, ""), r.s.GoalProgressFilter("*", c)}
	return Permissions{PubAllow: pub, SubAllow: sub}
}

// serve adds a serving instance's rows to a supervisor's p: for describe and each command, the
// class rail in the endpoint's queue group only (a "subject queue" row, which admits a queue
// subscription in that group and refuses a plain one, so no subscriber of the class rail sees a
// request another member answers), the scatter rail and its own instance rail, on both the ep and
// ep.v1 rails; its replies and events at its own instance and epoch; the goals' terminal facts;
// the contract artifacts it publishes; and its own svc records.
//
// SPEC §13.9 puts mediated writers between a serving instance and three of these: the
// provisioner registers the svc spec, the record writer writes the status (through epr, fenced
// by the epoch) and the goal writer commits results. The mesh's in-process manager holds those
// rows directly instead, a named simplification: its svc keys are pinned to its own instance, and
// a result fact is create-only.
func (r rowsFor) serve(p *Permissions) {
	sv := r.Serve
	for _, cmd := range sv.commands() {
		for _, versioned := range []bool{false, true} {
			one, all, inst := meshwire.ServeFilters(r.s, sv.Endpoint, sv.Instance, cmd, versioned)
			p.SubAllow = append(p.SubAllow, one+" "+meshwire.QueueGroup(sv.Endpoint), all, inst)
		}
	}
	records := meshwire.RecordsBucket(r.s)
	st := records.Stream()
	p.PubAllow = append(p.PubAllow,
		meshwire.ReplyPublishGrant(r.s, sv.Endpoint, sv.Instance, sv.Epoch, false),
		meshwire.ReplyPublishGrant(r.s, sv.Endpoint, sv.Instance, sv.Epoch, true),
		meshwire.EventPublishGrant(r.s, sv.Endpoint, sv.Instance, sv.Epoch),
		meshwire.GoalResultGrant(r.s, sv.Endpoint),
		meshwire.ContractPublishGrant(r.s), r.contractRead(),
		records.Subject(meshwire.ServiceKey(sv.Endpoint, sv.Instance, meshwire.ServiceSpecLeaf)),
		records.Subject(meshwire.ServiceKey(sv.Endpoint, sv.Instance, meshwire.ServiceStatusLeaf)),
		jsapi.StreamInfo+st, jsapi.MsgGet+st,
		jsapi.ConsumerCreate+st+".*."+records.Subject(meshwire.ServiceKey(sv.Endpoint, sv.Instance, ">")),
		jsapi.ConsumerInfo+st+".>", jsapi.ConsumerDelete+st+".>",
	)
}

// serves reports whether p's rows may carry an endpoint instance's (Grant.Serve).
func (p Profile) serves() bool {
	return p == ProfileSupervisor || p == ProfileRemoteManager || p == ProfileEndpointServe
}

// endpointServe is the endpoint-serve profile: one instance's serve rows and its own inbox.
func (r rowsFor) endpointServe() Permissions {
	p := Permissions{PubAllow: []string{jsapi.Info, jsapi.FlowControl}, SubAllow: []string{r.inbox()}}
	r.serve(&p)
	return p
}

// remoteManager is the remote-manager profile. Both identities write the instance's serve gate
// (epgate.<endpoint>.<instanceId>) and nothing else of the auth store: the host reads the gate
// and fences through it, and refuses any gate naming another principal. Only the supervisor
// identity takes the instance's lease, answers the manager liveness plane (so the plane's answer
// is the running manager's, never its short-lived executor's: seed core 0.59) and watches
// presence for its spawns' readiness.
func (r rowsFor) remoteManager() Permissions {
	sv := r.Serve
	gate := meshwire.EndpointGateKey(sv.Endpoint.Token(), sv.Instance)
	p := Permissions{PubAllow: []string{jsapi.Info, meshwire.AuthBucket(r.s).Subject(gate)}, SubAllow: []string{r.inbox()}}
	if r.Principal.Actor() != meshwire.RemoteManagerActorsOf(sv.Instance).Supervisor {
		return p
	}
	mgr, presence := meshwire.ManagerBucket(r.s), r.s.PresenceBucket()
	p.PubAllow = append(p.PubAllow,
		jsapi.StreamInfo+mgr.Stream(), jsapi.MsgGet+mgr.Stream(), mgr.Subject(meshwire.ManagerLeaseKey(sv.Instance)),
		meshwire.LivenessReplyGrant(r.s, wire.PlaneManager),
		// The spawned agents' presence, watched for their readiness.
		jsapi.StreamInfo+presence.Stream(), watchCreate(presence), jsapi.ConsumerInfo+presence.Stream()+".>", jsapi.FlowControl,
	)
	p.SubAllow = append(p.SubAllow, meshwire.LivenessServeFilter(r.s, wire.PlaneManager))
	p.SubDeny = serveDeny(meshwire.LivenessServeFilter(r.s, wire.PlaneManager))
	return p
}
