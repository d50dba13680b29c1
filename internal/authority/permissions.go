package authority

import (
	"fmt"
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Grant is the input of a profile's permissions. Which fields matter depends on the profile:
// every profile uses Space, Principal and ConnID (its inbox); agent also LifecycleUID,
// AllowPublish, AllowSubscribe, Role and Capabilities; deprovisioner names its Target lifecycle
// and the concrete Channels whose membership rows it may delete; a control instrument names its
// Instrument; a supervisor that serves an endpoint names its Serve rows; the host-issued
// profiles of host_rows.go name the instance (Serve), run (Run), caller (LifecycleUID) and
// target (Target) they are pinned to.
type Grant struct {
	Space        wire.Space
	Principal    wire.Principal
	ConnID       wire.ConnID
	LifecycleUID wire.LifecycleUID
	// AllowPublish lists the concrete channels the agent may post to. Default-deny.
	AllowPublish []string
	// AllowSubscribe lists the channels or channel patterns the agent may read, live and in
	// history. Default-deny.
	AllowSubscribe []string
	// Role, when set, lets the agent bind its role's shared task durable.
	Role string
	// Target is the lifecycle a deprovisioner tears down, or the one a retirement requester asks
	// to retire.
	Target wire.Lifecycle
	// Channels are the concrete channels whose membership rows of Target a deprovisioner deletes.
	Channels []string
	// Session names the session whose rails a session party's credential carries.
	Session SessionRails
	// Run names the one run a run operator replays, and its replay's takeover id; a run driver
	// and mediator name the run and takeover they are minted for.
	Run RunReplay
	// Capabilities are what an agent may do beyond its baseline, from the closed set
	// KnownCapabilities. Each is also stamped into the JWT as a "capability:<name>" tag.
	Capabilities []string
	// Instrument is the caller lifecycle UID a control instrument's rows pin (ProfileControlAdmin):
	// fresh at every mint (minting fills it when empty), named by no lifecycle head, gate or
	// credential row, so its reply rail is its own and no agent's.
	Instrument wire.LifecycleUID
	// Generation is the issued generation an agent's ep.v1 caller rows pin beside its lifecycle
	// (SPEC §13.15): minting fills a fresh one for an agent when empty, and a renewal keeps it.
	Generation string
	// Serve, on a supervisor, adds the serving rows of one endpoint instance at one epoch; a
	// remote manager's and an endpoint-serve credential's name the instance they serve. The
	// profiles that act for an instance without serving it pin its coordinates from it: a goal
	// writer its Endpoint (and the Instance whose gate it reads), a transfer reader the manager
	// Instance, a run driver and mediator the hosting Endpoint, Instance and Epoch. Commands
	// matter only to the serving profiles.
	Serve *ServeRows
}

// RunReplay names one replay of a run's journal: the run (none for a credential that replays
// nothing) and the takeover id its durable is named by.
type RunReplay struct {
	RunID      string
	TakeoverID string
}

// SessionRails names one session's pair of epoch-pinned rails.
type SessionRails struct {
	Endpoint  string
	SessionID string
	Epoch     int64
}

// Permissions are the NATS permission rows of one credential. Everything not allowed is denied.
type Permissions struct {
	PubAllow []string
	PubDeny  []string
	SubAllow []string
	// SubDeny narrows a serve filter to its own depth (see serveDeny).
	SubDeny []string
}

// jwt converts p into the JWT claim form.
func (p Permissions) jwt() jwt.Permissions {
	var out jwt.Permissions
	out.Pub.Allow = jwt.StringList(p.PubAllow)
	out.Pub.Deny = jwt.StringList(p.PubDeny)
	out.Sub.Allow = jwt.StringList(p.SubAllow)
	out.Sub.Deny = jwt.StringList(p.SubDeny)
	return out
}

// PermissionsFor returns the permissions of profile for g: a pure function of its inputs, so the
// credential the broker enforces can be read and tested row by row. The rows are those of the
// reference implementation (provision.js 0.59, SPEC §9 and Appendix B), in its order. It returns a
// *wire.ValidationError for an input that would widen a grant: a missing principal or
// connection id, a channel outside the channel grammar, a wildcard in AllowPublish, a missing
// lifecycle where the profile names one.
func PermissionsFor(profile Profile, g Grant) (Permissions, error) {
	if err := g.validate(profile); err != nil {
		return Permissions{}, err
	}
	r := rowsFor{Grant: g, s: g.Space, S: g.Space.Prefix()}
	switch profile {
	case ProfileAgent:
		return r.agent(), nil
	case ProfileObserver:
		return r.observer(false), nil
	case ProfileAdmin:
		return r.observer(true), nil
	case ProfileSupervisor:
		return r.supervisor(), nil
	case ProfileDelivery:
		return r.delivery(), nil
	case ProfileProvisioner:
		return r.provisioner(), nil
	case ProfileDeprovisioner:
		return r.deprovisioner(), nil
	case ProfileOperator:
		return r.operator(), nil
	case ProfileProbe:
		return Permissions{PubDeny: []string{">"}, SubAllow: []string{r.inbox()}}, nil
	case ProfileChannelWriter:
		return r.channelWriter(), nil
	case ProfilePurger:
		return r.purger(), nil
	case ProfileTeardown:
		return r.teardown(), nil
	case ProfileLedger:
		return r.ledger(), nil
	case ProfileSessionCaller:
		return r.session(meshwire.SessionIn, meshwire.SessionOut)
	case ProfileSessionServing:
		return r.session(meshwire.SessionOut, meshwire.SessionIn)
	case ProfileRunOperator:
		return r.runOperator(), nil
	case ProfileWarden:
		return r.warden(), nil
	case ProfileMembership:
		return r.membership(), nil
	case ProfileControlAdmin:
		return r.controlAdmin(), nil
	case ProfileRemoteManager:
		return r.remoteManager(), nil
	case ProfileEndpointServe:
		return r.endpointServe(), nil
	case ProfileGoalWriter:
		return r.goalWriter(), nil
	case ProfileSessionLedger:
		return r.sessionLedger(), nil
	case ProfileTransferReader:
		return r.transferReader(), nil
	case ProfileRetirementRequester:
		return r.retirementRequester(), nil
	case ProfileRunDriver:
		return r.runDriver(), nil
	case ProfileRunMediator:
		return r.runMediator(), nil
	case ProfileRunAdmitter:
		return r.runAdmitter(), nil
	case ProfileManagerCaller:
		return r.managerCaller(), nil
	case ProfileDeployer:
		return r.deployer(), nil
	}
	_, err := ParseProfile(string(profile))
	return Permissions{}, err
}

func (g *Grant) validate(profile Profile) error {
	if _, err := wire.ParseSpace(string(g.Space)); err != nil {
		return err
	}
	if g.Principal.IsZero() {
		return &wire.ValidationError{Field: "principal", Rule: "is required"}
	}
	if _, err := wire.ParseConnID(string(g.ConnID)); err != nil {
		return err
	}
	if profile.needsLifecycle() && profile != ProfileDeprovisioner {
		if _, err := wire.ParseLifecycleUID(string(g.LifecycleUID)); err != nil {
			return fmt.Errorf("the %s profile names its lifecycle: %w", profile, err)
		}
	}
	for _, ch := range g.AllowPublish {
		if err := wire.ValidateChannel(ch); err != nil {
			return fmt.Errorf("allow-publish: %w", err)
		}
	}
	for _, ch := range g.AllowSubscribe {
		if err := wire.ValidateChannelPattern(ch); err != nil {
			return fmt.Errorf("allow-subscribe: %w", err)
		}
	}
	if g.Role != "" {
		if _, err := wire.TaskDurable(g.Role); err != nil {
			return err
		}
	}
	if profile == ProfileRunOperator {
		if err := meshwire.ValidateTakeoverID(g.Run.TakeoverID); err != nil {
			return err
		}
		if g.Run.RunID != "" {
			if err := meshwire.ValidateRunID(g.Run.RunID); err != nil {
				return err
			}
		}
	}
	if err := g.validateEndpoint(profile); err != nil {
		return err
	}
	if err := g.validateRemote(profile); err != nil {
		return err
	}
	if profile == ProfileDeprovisioner {
		if g.Target.Principal.IsZero() {
			return &wire.ValidationError{Field: "target", Rule: "a deprovisioner names the lifecycle it tears down"}
		}
		if _, err := wire.ParseLifecycleUID(string(g.Target.UID)); err != nil {
			return fmt.Errorf("target: %w", err)
		}
		for _, ch := range g.Channels {
			if err := wire.ValidateChannel(ch); err != nil {
				return fmt.Errorf("deprovisioner channels: %w", err)
			}
		}
	}
	return nil
}

// session is a session party's rows: publish on one rail, read the other, and its own inbox.
// The rails are core-only, so no JetStream row is granted.
func (r rowsFor) session(pub, sub meshwire.SessionDir) (Permissions, error) {
	rail := func(dir meshwire.SessionDir) (string, error) {
		return meshwire.SessionRail(r.s, r.Session.Endpoint, r.Session.SessionID, r.Session.Epoch, dir)
	}
	p, err := rail(pub)
	if err != nil {
		return Permissions{}, err
	}
	sub1, err := rail(sub)
	if err != nil {
		return Permissions{}, err
	}
	return Permissions{PubAllow: []string{p}, SubAllow: []string{sub1, r.inbox()}}, nil
}

// runOperator is the run operator's rows (SPEC §14.3): the leader-served point read of the run
// records and, when it names a run, a read-only replay of that one run's journal through its own
// durable. It may never append to a journal or write a record.
func (r rowsFor) runOperator() Permissions {
	pub := []string{jsapi.MsgGet + meshwire.RecordsBucket(r.s).Stream(), jsapi.MsgGet + meshwire.AdmissionBucket(r.s).Stream()}
	if r.Run.RunID != "" {
		pub = append(pub, r.replayRows()...)
	}
	return Permissions{PubAllow: append(pub, jsapi.Info), SubAllow: []string{r.inbox()}}
}

// rowsFor builds one grant's rows. S is the space's subject prefix "cotal.<space>".
type rowsFor struct {
	Grant
	s wire.Space
	S string
}

func (r rowsFor) inbox() string { return meshwire.InboxGrant(r.ConnID) }

// chat renders a chat subject or pattern; the channels were validated by Grant.validate.
func (r rowsFor) chat(owner, actor, channel string) string {
	s, err := r.s.ChatPattern(owner, actor, channel)
	if err != nil {
		panic(fmt.Sprintf("authority: validated channel %q: %v", channel, err))
	}
	return s
}

func (r rowsFor) lifecycle() wire.Lifecycle {
	return wire.Lifecycle{Principal: r.Principal, UID: r.LifecycleUID}
}

// kvRead is the read set of a bucket: its info, point reads and watch consumers.
func kvRead(b wire.Bucket) []string {
	st := b.Stream()
	return []string{jsapi.StreamInfo + st, jsapi.MsgGet + st, jsapi.ConsumerCreate + st + ".>", jsapi.ConsumerInfo + st + ".>", jsapi.ConsumerDelete + st + ".>"}
}

// watchCreate is the create row of a bucket's watch consumers, pinned to the extended form
// "$JS.API.CONSUMER.CREATE.KV_<bucket>.<name>.$KV.<bucket>.>". SPEC §13.9 ("Mediated reads",
// subject convention): "JetStream API tails (extended-create filter tails and DIRECT.GET subject
// tails) are always spelled in FULL (cotal.<space>.…/$KV.…/$O.…)", and its grep tests require
// that "every filter or Direct-Get tail is fully qualified". So the broker refuses a create that
// carries no filter in its subject (the bare, name-only and multi-filter forms) or one outside
// the bucket, where a "KV_<bucket>.>" row admitted them all. Both clients send the pinned form for
// a one-filter watch: nats.go's ordered consumer (jetstream KeyValue.Watch, ListKeys) and
// nats.js's (@nats-io/kv watch, keys), whose multi-filter watches send a bare create that no
// row of ours ever admitted. The name stays one wildcard token: both libraries name an ordered
// consumer at random (nats.go a hash, nats.js "oc_<nuid>_<n>") and rename it on every reset.
func watchCreate(b wire.Bucket) string {
	return jsapi.ConsumerCreate + b.Stream() + ".*." + b.Subject(">")
}

// directGet is the Direct Get row of a bucket, its subject tail spelled in full
// ("$JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.>", SPEC §13.9's convention, as watchCreate).
func directGet(b wire.Bucket) string {
	return jsapi.DirectGet + b.Stream() + "." + b.Subject(">")
}

// agent is the agent profile (SPEC §9, Appendix B). Every metadata row it holds is one the SPEC
// lists, and each has a client that needs it: $JS.API.INFO (nats.js's JetStream manager checks it
// at open), STREAM.INFO on CHAT (the join watermark), on the presence and channel buckets (opening
// a KV handle, in nats.go and nats.js), on the delivery lease and on TASK with a role. What they
// expose beyond content (per-subject counts, so channel names and who posts where) is a property
// of the SPEC's grants, measured by TestAgentMetadataExposure.
func (r rowsFor) agent() Permissions {
	o, a := r.Principal.Owner(), r.Principal.Actor()
	l := r.lifecycle()
	chat, dm, task, dlv := r.s.ChatStream(), r.s.DMStream(), r.s.TaskStream(), r.s.DLVStream()
	presence, channels := r.s.PresenceBucket(), r.s.ChannelsBucket()
	hist, dmD, dlvD := wire.ChatHistConsumer(l), wire.DMDurable(l), wire.DLVDurable(l)

	var pub []string
	for _, ch := range r.AllowPublish {
		pub = append(pub, r.chat(o, a, ch))
	}
	pub = append(pub,
		meshwire.DMSendGrant(r.s, r.Principal),
		meshwire.AnycastSendGrant(r.s, r.Principal),
		r.s.ControlSubject(wire.ControlDelivery, r.Principal),
	)
	for _, plane := range wire.Planes {
		pub = append(pub, r.s.LivenessSubject(plane, r.Principal))
	}
	pub = append(pub, jsapi.Info,
		jsapi.StreamInfo+chat, jsapi.StreamInfo+presence.Stream(), jsapi.StreamInfo+channels.Stream())
	for _, ch := range r.AllowSubscribe {
		pub = append(pub, jsapi.ConsumerCreate+chat+"."+hist+"."+r.chat("*", "*", ch))
	}
	pub = append(pub,
		jsapi.ConsumerInfo+chat+"."+hist, jsapi.ConsumerNext+chat+"."+hist, jsapi.ConsumerDelete+chat+"."+hist,
		jsapi.ConsumerInfo+dm+"."+dmD, jsapi.ConsumerNext+dm+"."+dmD, jsapi.Ack+dm+"."+dmD+".>",
		jsapi.ConsumerInfo+dlv+"."+dlvD, jsapi.ConsumerNext+dlv+"."+dlvD, jsapi.Ack+dlv+"."+dlvD+".>",
		watchCreate(presence), jsapi.ConsumerInfo+presence.Stream()+".>", jsapi.ConsumerDelete+presence.Stream()+".>",
		jsapi.FlowControl, presence.Subject(wire.PresenceKey(r.Principal)),
		jsapi.MsgGet+channels.Stream(),
		watchCreate(channels), jsapi.ConsumerInfo+channels.Stream()+".>", jsapi.ConsumerDelete+channels.Stream()+".>",
		jsapi.StreamInfo+meshwire.DeliveryBucket(r.s).Stream(), jsapi.MsgGet+meshwire.DeliveryBucket(r.s).Stream(),
	)
	if r.Role != "" {
		svc, _ := wire.TaskDurable(r.Role) // validated by Grant.validate
		pub = append(pub, jsapi.StreamInfo+task, jsapi.ConsumerInfo+task+"."+svc, jsapi.ConsumerNext+task+"."+svc, jsapi.Ack+task+"."+svc+".>")
	}
	epPub, epSub := r.agentEndpoint()
	pub = append(pub, epPub...)
	// Deny beats allow: no consumer of its own on the private streams, whatever else is granted.
	// CHAT has no such row, since it would also kill the chathist create.
	var deny []string
	for _, st := range []string{dm, task, dlv} {
		deny = append(deny, jsapi.ConsumerCreate+st, jsapi.ConsumerCreate+st+".>", jsapi.ConsumerDurable+st+".>")
	}
	sub := []string{r.inbox(), meshwire.Subtree(r.s.ControlSubject(wire.ControlDelivery, r.Principal))}
	for _, plane := range wire.Planes {
		sub = append(sub, meshwire.Subtree(r.s.LivenessSubject(plane, r.Principal)))
	}
	for _, ch := range r.AllowSubscribe {
		sub = append(sub, r.chat("*", "*", ch))
	}
	sub = append(sub, epSub...)
	return Permissions{PubAllow: pub, PubDeny: deny, SubAllow: sub}
}

// observer is the observer profile, and with admin the admin profile, which adds direct-message
// history and the inst and svc taps but never the ep rails or the whole space.
func (r rowsFor) observer(admin bool) Permissions {
	chat, presence := r.s.ChatStream(), r.s.PresenceBucket()
	pub := []string{
		jsapi.Info, jsapi.StreamInfo + chat, jsapi.StreamInfo + presence.Stream(),
		jsapi.ConsumerCreate + chat, jsapi.ConsumerCreate + chat + ".>", jsapi.ConsumerInfo + chat + ".>", jsapi.ConsumerNext + chat + ".>", jsapi.ConsumerDelete + chat + ".>", jsapi.Ack + chat + ".>",
		watchCreate(presence), jsapi.ConsumerInfo + presence.Stream() + ".>", jsapi.ConsumerDelete + presence.Stream() + ".>",
	}
	for _, b := range []wire.Bucket{r.s.ChannelsBucket(), meshwire.MembershipBucket(r.s)} {
		st := b.Stream()
		pub = append(pub, jsapi.StreamInfo+st, jsapi.MsgGet+st, watchCreate(b), jsapi.ConsumerInfo+st+".>", jsapi.ConsumerDelete+st+".>")
	}
	// SPEC Appendix B also lets observers read the delivery lease (delivery health); the
	// reference's code lacks the two rows. Read-only, so the SPEC wins.
	pub = append(pub, jsapi.StreamInfo+meshwire.DeliveryBucket(r.s).Stream(), jsapi.MsgGet+meshwire.DeliveryBucket(r.s).Stream())
	pub = append(pub, jsapi.FlowControl)
	sub := []string{r.s.KindAll(wire.KindChat)}
	if admin {
		dm := r.s.DMStream()
		pub = append(pub, jsapi.StreamInfo+dm, jsapi.ConsumerCreate+dm, jsapi.ConsumerCreate+dm+".>", jsapi.ConsumerInfo+dm+".>", jsapi.ConsumerNext+dm+".>", jsapi.ConsumerDelete+dm+".>", jsapi.Ack+dm+".>")
		sub = append(sub, r.s.KindAll(wire.KindInst), r.s.KindAll(wire.KindSvc))
	}
	return Permissions{PubAllow: pub, SubAllow: append(sub, r.inbox())}
}

func (r rowsFor) supervisor() Permissions {
	mgr, presence := meshwire.ManagerBucket(r.s), r.s.PresenceBucket()
	p := Permissions{
		PubAllow: []string{
			jsapi.Info, jsapi.StreamInfo + mgr.Stream(), jsapi.MsgGet + mgr.Stream(), mgr.Subject(meshwire.LeaseKeys()),
			presence.Subject(wire.PresenceKey(r.Principal)), jsapi.StreamInfo + presence.Stream(),
			// The spawned agents' presence, watched for their readiness; a watch's end deletes its
			// consumer, as an observer's does.
			watchCreate(presence), jsapi.ConsumerInfo + presence.Stream() + ".>", jsapi.ConsumerDelete + presence.Stream() + ".>",
			jsapi.FlowControl,
			r.s.ControlSubject(wire.ControlDeliveryAdmin, r.Principal),
			meshwire.LivenessReplyGrant(r.s, wire.PlaneManager),
		},
		SubAllow: []string{
			r.inbox(),
			meshwire.Subtree(r.s.ControlSubject(wire.ControlDeliveryAdmin, r.Principal)),
			meshwire.LivenessServeFilter(r.s, wire.PlaneManager),
		},
		SubDeny: serveDeny(meshwire.LivenessServeFilter(r.s, wire.PlaneManager)),
	}
	if r.Serve != nil {
		r.serve(&p)
	}
	return p
}

// serveDeny returns the sub.deny rows that hold each serve filter (<rail>.*.*) to its own
// depth. The broker checks a wildcard subscription token by token against the allow rows, so
// under <rail>.*.* it would also take <rail>.*.>, which receives every answer on the rail's
// reply leaves (<rail>.*.*.reply.<nonce>), meant for the callers alone (SPEC §13.9). The deny
// row <rail>.*.*.> makes the broker drop those deliveries. The reference grants no such row; it
// only narrows.
func serveDeny(filters ...string) []string {
	deny := make([]string, len(filters))
	for i, f := range filters {
		deny[i] = f + ".>"
	}
	return deny
}

func (r rowsFor) delivery() Permissions {
	chat, inbox, dlv := r.s.ChatStream(), meshwire.InboxStream(r.s), r.s.DLVStream()
	reader := inbox + "." + meshwire.ReaderDurable
	pub := []string{
		jsapi.Info, jsapi.StreamInfo + chat, jsapi.StreamInfo + inbox, jsapi.StreamInfo + dlv,
		jsapi.ConsumerCreate + chat, jsapi.ConsumerCreate + chat + ".>", jsapi.ConsumerDurable + chat + ".>", jsapi.ConsumerInfo + chat + ".>", jsapi.ConsumerNext + chat + ".>", jsapi.ConsumerDelete + chat + ".>", jsapi.Ack + chat + ".>",
		jsapi.ConsumerCreate + reader + ".>", jsapi.ConsumerDurable + reader, jsapi.ConsumerInfo + reader, jsapi.ConsumerNext + reader, jsapi.ConsumerDelete + reader, jsapi.Ack + reader + ".>",
		jsapi.MsgDelete + inbox,
		jsapi.FlowControl,
	}
	for _, b := range []wire.Bucket{r.s.PresenceBucket(), r.s.ChannelsBucket(), meshwire.MembersBucket(r.s), meshwire.ACLBucket(r.s)} {
		pub = append(pub, kvRead(b)...)
	}
	lease := meshwire.DeliveryBucket(r.s)
	pub = append(pub,
		meshwire.MembersBucket(r.s).Subject(">"),
		jsapi.StreamInfo+lease.Stream(), jsapi.MsgGet+lease.Stream(), lease.Subject(meshwire.LeaseKeys()),
		meshwire.LifecycleWriteGrant(r.s, wire.KindDinbox), meshwire.LifecycleWriteGrant(r.s, wire.KindDlv),
		meshwire.ControlReplyGrant(r.s, wire.ControlDelivery), meshwire.ControlReplyGrant(r.s, wire.ControlDeliveryAdmin),
		meshwire.LivenessReplyGrant(r.s, wire.PlaneDelivery),
	)
	return Permissions{
		PubAllow: pub,
		SubAllow: []string{
			r.inbox(), meshwire.ControlServeFilter(r.s, wire.ControlDelivery), meshwire.ControlServeFilter(r.s, wire.ControlDeliveryAdmin),
			meshwire.LivenessServeFilter(r.s, wire.PlaneDelivery),
		},
		SubDeny: serveDeny(meshwire.ControlServeFilter(r.s, wire.ControlDelivery), meshwire.ControlServeFilter(r.s, wire.ControlDeliveryAdmin),
			meshwire.LivenessServeFilter(r.s, wire.PlaneDelivery)),
	}
}

// spaceStreams lists the streams of a space's messaging plane, in the reference's order: the
// message streams, the artifact store, then the buckets.
func spaceStreams(s wire.Space) []string {
	streams := []string{s.ChatStream(), s.DMStream(), s.TaskStream(), meshwire.InboxStream(s), s.DLVStream(), meshwire.WFJStream(s), meshwire.ObjectStream(meshwire.ArtifactsBucket(s))}
	for _, b := range meshwire.Buckets(s) {
		streams = append(streams, b.Stream())
	}
	return streams
}

// controlStreams are the control surface's ingress and work streams (SPEC §13.12): journal-class
// submissions, timer requests and timers, record writes, work pools. Provisioned, watched and
// torn down with the space.
func controlStreams(s wire.Space) []string {
	return []string{meshwire.SubmissionStream(s), meshwire.TimerRequestStream(s), meshwire.TimerStream(s), meshwire.RecordWriteStream(s), meshwire.WorkStream(s)}
}

// ttlBuckets are the buckets whose max_age is their TTL, reconciled at every provisioning.
func ttlBuckets(s wire.Space) []wire.Bucket {
	return []wire.Bucket{s.PresenceBucket(), meshwire.DeliveryBucket(s), meshwire.ManagerBucket(s)}
}

func (r rowsFor) provisioner() Permissions {
	pub := []string{jsapi.Info}
	// The contract stream is not among spaceStreams, whose rows in other profiles (the warden's
	// message deletes, teardown's stream deletes) must never reach it: no profile holds a delete,
	// purge, update or message delete on EPC_<space> (SPEC §13.9, §13.12).
	// Nor is the run admission store: no profile deletes, purges or rewrites an admission (SPEC
	// §14.8).
	for _, st := range append(spaceStreams(r.s), meshwire.ContractStream(r.s), meshwire.EventStream(r.s), meshwire.FactStream(r.s), meshwire.AdmissionBucket(r.s).Stream()) {
		pub = append(pub, jsapi.StreamCreate+st, jsapi.StreamInfo+st)
	}
	for _, st := range controlStreams(r.s) {
		pub = append(pub, jsapi.StreamCreate+st, jsapi.StreamInfo+st)
	}
	for _, b := range ttlBuckets(r.s) {
		pub = append(pub, jsapi.StreamUpdate+b.Stream())
	}
	for _, st := range []string{r.s.DMStream(), r.s.DLVStream(), r.s.TaskStream()} {
		pub = append(pub, jsapi.ConsumerCreate+st+".>", jsapi.ConsumerDurable+st+".>", jsapi.ConsumerInfo+st+".>")
	}
	// The trust anchors are the operator's to write (SPEC §13.9, §13.10): the space's sessions
	// key is registered, and its window closed, through here; anchors are read leader-served.
	records := meshwire.RecordsBucket(r.s)
	pub = append(pub, records.Subject(meshwire.SignerKeys()), jsapi.MsgGet+records.Stream())
	acl, channels := meshwire.ACLBucket(r.s), r.s.ChannelsBucket()
	pub = append(pub,
		acl.Subject(">"), channels.Subject(">"),
		jsapi.MsgGet+acl.Stream(), jsapi.DirectGet+acl.Stream()+".>",
		jsapi.MsgGet+channels.Stream(), jsapi.DirectGet+channels.Stream()+".>",
	)
	return Permissions{PubAllow: pub, SubAllow: []string{r.inbox()}}
}

// deprovisioner is pinned by exact name to one lifecycle: a stale teardown credential can never
// reach a same-name successor's durables or rows.
func (r rowsFor) deprovisioner() Permissions {
	t := r.Target
	acl, members := meshwire.ACLBucket(r.s), meshwire.MembersBucket(r.s)
	pub := []string{
		jsapi.Info,
		jsapi.ConsumerDelete + r.s.DMStream() + "." + wire.DMDurable(t),
		jsapi.ConsumerDelete + r.s.DLVStream() + "." + wire.DLVDurable(t),
		jsapi.StreamInfo + acl.Stream(),
		acl.Subject(meshwire.ACLKey(t)),
	}
	if len(r.Channels) > 0 {
		pub = append(pub, jsapi.StreamInfo+members.Stream())
		for _, ch := range r.Channels {
			key, _ := meshwire.MemberKey(ch, t) // validated by Grant.validate
			pub = append(pub, members.Subject(key))
		}
	}
	return Permissions{PubAllow: pub, SubAllow: []string{r.inbox()}}
}

// operator is the human CLI's one-shot send credential: it posts, messages and hands out tasks as
// its own principal, reads presence to resolve names and the registry to resolve channels.
func (r rowsFor) operator() Permissions {
	presence, channels := r.s.PresenceBucket(), r.s.ChannelsBucket()
	return Permissions{
		PubAllow: []string{
			r.chat(r.Principal.Owner(), r.Principal.Actor(), ">"),
			meshwire.DMSendGrant(r.s, r.Principal), meshwire.AnycastSendGrant(r.s, r.Principal),
			presence.Subject(wire.PresenceKey(r.Principal)),
			jsapi.Info, jsapi.StreamInfo + presence.Stream(), watchCreate(presence), jsapi.ConsumerInfo + presence.Stream() + ".>",
			jsapi.StreamInfo + channels.Stream(), jsapi.MsgGet + channels.Stream(), jsapi.DirectGet + channels.Stream() + ".>",
			watchCreate(channels), jsapi.ConsumerInfo + channels.Stream() + ".>",
			jsapi.FlowControl,
		},
		SubAllow: []string{r.inbox()},
	}
}

func (r rowsFor) channelWriter() Permissions {
	ch := r.s.ChannelsBucket()
	return Permissions{
		PubAllow: []string{
			jsapi.Info, ch.Subject(">"), jsapi.StreamInfo + ch.Stream(), jsapi.StreamCreate + ch.Stream(),
			jsapi.MsgGet + ch.Stream(), jsapi.DirectGet + ch.Stream() + ".>",
		},
		SubAllow: []string{r.inbox()},
	}
}

func (r rowsFor) purger() Permissions {
	return Permissions{
		PubAllow: []string{jsapi.Info, jsapi.StreamPurge + r.s.ChatStream(), jsapi.StreamPurge + r.s.DMStream()},
		SubAllow: []string{r.inbox()},
	}
}

// teardown is the only profile that deletes streams.
func (r rowsFor) teardown() Permissions {
	presence, channels := r.s.PresenceBucket(), r.s.ChannelsBucket()
	pub := []string{
		jsapi.Info, watchCreate(presence), jsapi.ConsumerInfo + presence.Stream() + ".>",
		jsapi.MsgGet + channels.Stream(), jsapi.DirectGet + channels.Stream() + ".>",
		watchCreate(channels), jsapi.ConsumerInfo + channels.Stream() + ".>",
		jsapi.FlowControl,
	}
	records := meshwire.RecordsBucket(r.s).Stream()
	for _, st := range spaceStreams(r.s) {
		pub = append(pub, jsapi.StreamInfo+st)
		if st != records { // the records store is never deleted (SPEC §13.12's retention floor)
			pub = append(pub, jsapi.StreamDelete+st)
		}
	}
	// The contract stream and the admission store are read, never deleted: artifacts and
	// admissions are permanent (SPEC §13.12, §14.8).
	pub = append(pub, jsapi.StreamInfo+meshwire.ContractStream(r.s), jsapi.StreamInfo+meshwire.AdmissionBucket(r.s).Stream())
	// Events are a day's notifications and go with the space, as do the control surface's
	// requests, timers and work; facts outlive it (SPEC §13.12).
	pub = append(pub, jsapi.StreamInfo+meshwire.EventStream(r.s), jsapi.StreamDelete+meshwire.EventStream(r.s), jsapi.StreamInfo+meshwire.FactStream(r.s))
	for _, st := range controlStreams(r.s) {
		pub = append(pub, jsapi.StreamInfo+st, jsapi.StreamDelete+st)
	}
	pub = append(pub, jsapi.StreamPurge+r.s.ChatStream(), channels.Subject(">"))
	return Permissions{PubAllow: pub, SubAllow: []string{r.inbox()}}
}

// ledger writes the auth store and the user-auth store (the people ledger and the registry of
// remote managers) and reads them leader-served; the watch rows list their keys.
func (r rowsFor) ledger() Permissions {
	pub := []string{jsapi.Info}
	for _, b := range []wire.Bucket{meshwire.AuthBucket(r.s), meshwire.UserAuthBucket(r.s)} {
		st := b.Stream()
		pub = append(pub, jsapi.StreamInfo+st, jsapi.MsgGet+st, b.Subject(">"),
			jsapi.ConsumerCreate+st+".>", jsapi.ConsumerInfo+st+".>", jsapi.ConsumerDelete+st+".>")
	}
	return Permissions{PubAllow: append(pub, jsapi.FlowControl), SubAllow: []string{r.inbox()}}
}

// warden is the integrity warden's rows: it hears the account's JetStream API audit and consumer
// deletions, lists and deletes consumers on every stream of the space, watches every stream and
// bucket through its own consumers, deletes a stored message by sequence and writes a bucket row
// back. It holds no messaging subject, so it can neither post nor read a live delivery.
//
// Its JetStream rows name no stream: a stream token is a wildcard, and the space account's only
// JetStream is its store account's, so the rows reach every stream of the space and of no other
// (a capture can land in any of them) at a size that does not grow with the space's name. The
// records store it only reads (SPEC §13.9 lets only each record kind's writer write it, §13.12
// deletes nothing there); the contract stream and the admission store refuse deletes whoever
// asks. Those three are denied its message deletes, and its bucket writes name each bucket but
// the records.
func (r rowsFor) warden() Permissions {
	records := meshwire.RecordsBucket(r.s)
	pub := []string{jsapi.Info, jsapi.FlowControl,
		jsapi.StreamInfo + "*", jsapi.MsgGet + "*", jsapi.MsgDelete + "*", jsapi.ConsumerList + "*",
		jsapi.ConsumerCreate + "*.>", jsapi.ConsumerInfo + "*.>", jsapi.ConsumerNext + "*.>", jsapi.ConsumerDelete + "*.>",
	}
	var deny []string
	for _, st := range []string{records.Stream(), meshwire.ContractStream(r.s), meshwire.AdmissionBucket(r.s).Stream()} {
		deny = append(deny, jsapi.MsgDelete+st)
	}
	for _, b := range meshwire.Buckets(r.s) {
		if b != records {
			pub = append(pub, b.Subject(">"))
		}
	}
	// The notice to the sender of a message it deleted is a DM from the warden itself.
	pub = append(pub, meshwire.DMSendGrant(r.s, r.Principal))
	return Permissions{PubAllow: pub, PubDeny: deny, SubAllow: []string{r.inbox(), jsapi.AuditAdvisory, jsapi.ConsumerDeletedAdvs}}
}

// membership writes the membership feed and reads the durable memberships it reports: the
// reference's membership-rw rows.
func (r rowsFor) membership() Permissions {
	feed, members := meshwire.MembershipBucket(r.s), meshwire.MembersBucket(r.s)
	pub := []string{jsapi.Info}
	for _, b := range []wire.Bucket{feed, members} {
		st := b.Stream()
		pub = append(pub, jsapi.StreamInfo+st, jsapi.MsgGet+st, jsapi.ConsumerCreate+st+".>", jsapi.ConsumerInfo+st+".>", jsapi.ConsumerDelete+st+".>")
	}
	pub = append(pub, feed.Subject(">"), jsapi.FlowControl)
	return Permissions{PubAllow: pub, SubAllow: []string{r.inbox()}}
}

// String renders p one row per line, for debugging and test failures.
func (p Permissions) String() string {
	var b strings.Builder
	for _, sect := range []struct {
		name string
		rows []string
	}{{"pub.allow", p.PubAllow}, {"pub.deny", p.PubDeny}, {"sub.allow", p.SubAllow}, {"sub.deny", p.SubDeny}} {
		for _, row := range sect.rows {
			fmt.Fprintf(&b, "%s %s\n", sect.name, row)
		}
	}
	return b.String()
}
