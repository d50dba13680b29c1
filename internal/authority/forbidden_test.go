package authority_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// This file is the forbidden-operation matrix at scale (issue 14, item 5). It GENERATES the
// operations: a universe of subjects built from the wire contract's builders and the JetStream
// API verbs, for the mesh's space, a second space the same broker serves, and foreign
// principals, lifecycles, channels, roles, runs and sessions. For each credential it keeps the
// operations an oracle says the profile must not do, attempts every one of them on the real
// broker, and requires that the broker refused each one, one refusal per attempt.
//
// The oracle is written here from the SPEC, not from permissions.go: each profile's grant is a
// short list of NATS patterns spelled from SPEC §9, §13.9, §14 and Appendix B (agent, observer,
// admin, deprovisioner, operator, probe, the session halves, the run operator, the goal writer,
// the retirement requester, the run driver; the session ledger and transfer reader from the
// reference's rows, which the SPEC does not list), and, for the
// host profiles whose rows the SPEC leaves to "its function's verbs" (supervisor, delivery,
// provisioner, channel-writer, purger, teardown, ledger, warden, run mediator), a deliberately generous
// function scope: everything the daemon could plausibly need on its own resources is treated as
// allowed and left out, so what remains is only what is clearly not its function. An operation
// is forbidden when no grant pattern covers it (a subscription must be a subset of a granted
// pattern: reading more than the grant is reading outside it), or when a SPEC deny row covers it.
//
// Attempts are efficient: one connection per credential, its operations sent in batches of
// fbBatch, each batch settled once (meshtest.Client.Settle) and its refusals matched one to one
// against what was sent, so a publish whose refusal never came is an operation that succeeded.
// The broker does not disconnect a client for refusals (nats-server counts none: each is one
// -ERR line, and the client queues its asynchronous errors without bound); the test still
// checks that every connection is up after its attempts, and the batches keep what is recorded
// between two settles small. Refused subscriptions are made on one shared channel, so no
// per-subscription buffer is allocated.
//
// Generous scopes only shrink the forbidden set; they cannot make the test pass on a wrong
// grant, since every operation left in the set must be refused. The positive controls guard the
// other direction: per credential, a few operations the SPEC allows must come back unrefused, so
// a checker that saw everything as refused could not pass.

const (
	fbPublish      = "publish"         // a core publish on a Cotal rail
	fbSubscribe    = "subscribe"       // a subscription
	fbConsumerMake = "consumer-create" // $JS.API.CONSUMER.CREATE / DURABLE.CREATE
	fbConsumerAPI  = "consumer-api"    // consumer INFO, MSG.NEXT, DELETE, PAUSE and acks
	fbStreamAPI    = "stream-api"      // $JS.API.STREAM.*, DIRECT.GET and account-wide verbs
	fbKVPut        = "kv-put"          // a put on $KV.<bucket>.<key>
	fbKVDelete     = "kv-delete"       // a delete marker on $KV.<bucket>.<key>
	fbSys          = "sys"             // system-account requests
)

var fbKinds = []string{fbPublish, fbSubscribe, fbConsumerMake, fbConsumerAPI, fbStreamAPI, fbKVPut, fbKVDelete, fbSys}

// JetStream API verbs no profile is granted, so jsapi does not spell them.
const (
	fbConsumerNames = "$JS.API.CONSUMER.NAMES."
	fbConsumerPause = "$JS.API.CONSUMER.PAUSE."
	fbStreamSnap    = "$JS.API.STREAM.SNAPSHOT."
	fbStreamLeader  = "$JS.API.STREAM.LEADER.STEPDOWN."
	fbStreamList    = "$JS.API.STREAM.LIST"
	fbStreamNames   = "$JS.API.STREAM.NAMES"
)

// fbOp is one operation: a publish (with its payload, shaped so that the operation would take
// effect if the broker let it through) or a subscription.
type fbOp struct {
	op      string // "Publish" or "Subscription", as the broker names them
	subject string
	kind    string
	space   string // the space the operation names, "" for none
	data    []byte
	hdr     nats.Header
}

// fbLifetime is how long the matrix's credentials live.
const fbLifetime = 30 * time.Minute

func (o fbOp) key() string { return o.op + " " + o.subject }

// fbWorld holds the coordinates the universe is generated from.
type fbWorld struct {
	spaces             []wire.Space
	alice, bob, forged wire.Principal
	aliceL, aliceOld   wire.Lifecycle // the agent's lifecycle, and a retired one of the same principal
	bobL               wire.Lifecycle
	channels           []string
	roles              []string
	runs               []string
	takeover           string
	sessions           []fbSession
	accounts           []string // the spaces' account and store account keys
	stores             []string // the spaces' store account keys, which hold their JetStream
	foreignInbox       string   // some other connection's inbox
	// instance is the serving manager instance of the matrix, other another instance; epoch is
	// the epoch the serving credential is minted at.
	instance, other wire.LifecycleUID
	epoch           int64
}

type fbSession struct {
	endpoint, id string
	epoch        int64
}

func (s fbSession) rail(sp wire.Space, dir meshwire.SessionDir) string {
	r, err := meshwire.SessionRail(sp, s.endpoint, s.id, s.epoch, dir)
	if err != nil {
		panic(err)
	}
	return r
}

// fbBuckets are every bucket of a space, beyond the messaging and authority planes' list.
func fbBuckets(s wire.Space) []wire.Bucket {
	return append(meshwire.Buckets(s), meshwire.RecordsBucket(s), meshwire.SessionsBucket(s), meshwire.AdmissionBucket(s))
}

// hostStreams are the streams outside the contract's setup that a host-issued credential names:
// the timer stream and each manager instance's transfer store. The generous host oracles never
// reach them through the contract's list.
func (w *fbWorld) hostStreams(s wire.Space) []string {
	return []string{meshwire.TimerStream(s), meshwire.ObjectStream(meshwire.TransferBucket(s, w.instance)), meshwire.ObjectStream(meshwire.TransferBucket(s, w.other))}
}

// fbStreams are every stream of a space: the message streams, the artifact store, the contract
// stream and the buckets.
func fbStreams(s wire.Space) []string {
	st := []string{s.ChatStream(), s.DMStream(), s.TaskStream(), meshwire.InboxStream(s), s.DLVStream(), meshwire.WFJStream(s), meshwire.ObjectStream(meshwire.ArtifactsBucket(s)), meshwire.ContractStream(s)}
	for _, b := range fbBuckets(s) {
		st = append(st, b.Stream())
	}
	return st
}

func fbMust(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func fbPrincipal(s string) wire.Principal {
	p, err := wire.ParsePrincipal(s)
	if err != nil {
		panic(err)
	}
	return p
}

// universe generates every operation of the matrix for a credential whose principal is me and
// whose own lifecycle (an agent's, a control instrument's; zero for none) is own.
func (w *fbWorld) universe(me wire.Principal, own wire.Lifecycle) []fbOp {
	var ops []fbOp
	for _, s := range w.spaces {
		ops = append(ops, w.spaceOps(s, me, own)...)
	}
	ops = append(ops, w.globalOps()...)
	seen := map[string]bool{}
	out := ops[:0]
	for _, o := range ops {
		k := o.key() + " " + o.kind
		if !seen[k] {
			seen[k] = true
			out = append(out, o)
		}
	}
	return out
}

func (w *fbWorld) spaceOps(s wire.Space, me wire.Principal, own wire.Lifecycle) []fbOp {
	sp := string(s)
	var ops []fbOp
	add := func(op, kind, subject string, data []byte) {
		ops = append(ops, fbOp{op: op, subject: subject, kind: kind, space: sp, data: data})
	}
	pub := func(kind, subject string, data []byte) { add("Publish", kind, subject, data) }
	subscribe := func(subject string) { add("Subscription", fbSubscribe, subject, nil) }

	principals := []wire.Principal{me}
	for _, p := range []wire.Principal{w.alice, w.bob, w.forged} {
		if p != me {
			principals = append(principals, p)
		}
	}
	lcs := []wire.Lifecycle{w.aliceL, w.aliceOld, w.bobL}

	// The messaging rails: each concrete subject is published to and subscribed to.
	var rails []string
	for _, p := range principals {
		for _, ch := range w.channels {
			rails = append(rails, fbMust(s.ChatSubject(p, ch)))
		}
		for _, snd := range principals {
			rails = append(rails, s.DMSubject(p, snd))
		}
		for _, role := range w.roles {
			rails = append(rails, fbMust(s.AnycastSubject(role, p)))
		}
		for _, svc := range []wire.ControlService{wire.ControlDelivery, wire.ControlDeliveryAdmin} {
			rails = append(rails, s.ControlSubject(svc, p), wire.ReplySubject(s.ControlSubject(svc, p), "n1"))
		}
		for _, plane := range wire.Planes {
			rails = append(rails, s.LivenessSubject(plane, p), wire.ReplySubject(s.LivenessSubject(plane, p), "n1"))
		}
	}
	for _, l := range lcs {
		rails = append(rails, meshwire.DinboxSubject(s, l), meshwire.DlvSubject(s, l))
	}
	for _, r := range w.runs {
		rails = append(rails, meshwire.WFJSubject(s, r))
	}
	rails = append(rails, meshwire.TraceSubject(s, "x"))
	for _, ss := range w.sessions {
		rails = append(rails, ss.rail(s, meshwire.SessionIn), ss.rail(s, meshwire.SessionOut))
	}
	for _, r := range rails {
		pub(fbPublish, r, []byte(`{"forbidden":true}`))
		subscribe(r)
	}

	// Subscriptions to patterns: whole rails, other principals' filters, the serving filters.
	subscribe(meshwire.Subtree(s.Prefix()))
	for _, k := range []wire.SubjectKind{wire.KindChat, wire.KindInst, wire.KindSvc, wire.KindCtl, wire.KindLive, wire.KindDinbox,
		wire.KindDlv, meshwire.KindWfj, meshwire.KindTrace, meshwire.KindEps,
		// The endpoint rails of SPEC §13 (no wire builder yet): Appendix B denies them all to
		// every profile here, the admin's tap included.
		"ep", "epe", "epc", "epj", "epf", "epr", "ept", "epw"} {
		subscribe(s.KindAll(k))
	}
	for _, ch := range w.channels {
		subscribe(fbMust(s.ChatFilter(ch)))
	}
	for _, p := range principals {
		subscribe(fbMust(s.ChatPattern(p.Owner(), p.Actor(), ">")))
		subscribe(meshwire.DMFilter(s, p))
		for _, svc := range []wire.ControlService{wire.ControlDelivery, wire.ControlDeliveryAdmin} {
			subscribe(meshwire.Subtree(s.ControlSubject(svc, p)))
		}
		for _, plane := range wire.Planes {
			subscribe(meshwire.Subtree(s.LivenessSubject(plane, p)))
		}
	}
	for _, role := range w.roles {
		subscribe(fbMust(s.AnycastFilter(role)))
	}
	for _, svc := range []wire.ControlService{wire.ControlDelivery, wire.ControlDeliveryAdmin} {
		subscribe(meshwire.ControlServeFilter(s, svc))
		subscribe(s.Prefix() + ".ctl." + string(svc) + ".*.>")
	}
	for _, plane := range wire.Planes {
		subscribe(meshwire.LivenessServeFilter(s, plane))
		subscribe(s.Prefix() + ".live." + string(plane) + ".*.>")
	}
	subscribe(meshwire.LifecycleWriteGrant(s, wire.KindDinbox))
	subscribe(meshwire.LifecycleWriteGrant(s, wire.KindDlv))
	subscribe(meshwire.WFJFilter(s))
	subscribe(s.Prefix() + ".eps.search.>")
	for _, b := range fbBuckets(s) {
		subscribe(b.Subject(">"))
	}
	callers := lcs
	if own.UID != "" && !slices.Contains(lcs, own) {
		callers = append(slices.Clone(lcs), own)
	}
	ops = append(ops, w.endpointOps(s, callers)...)
	subscribe("$O." + string(meshwire.ArtifactsBucket(s)) + ".>")
	for _, iid := range []wire.LifecycleUID{w.instance, w.other} {
		b := meshwire.TransferBucket(s, iid)
		subscribe(meshwire.ObjectAll(b))
		pub(fbPublish, meshwire.ObjectSubject(b, meshwire.ObjectMeta, "eA"), []byte(`{"forbidden":true}`))
		pub(fbPublish, meshwire.ObjectSubject(b, meshwire.ObjectChunk, fbDigest), []byte(`forbidden`))
	}

	// Bucket writes: a put and a delete marker on every bucket, for the keys of the contract.
	keys := []string{meshwire.LeaseKey(0), meshwire.ManagerLeaseKey(w.aliceL.UID), meshwire.ManagerRenewalKey, meshwire.MembershipFeedKey,
		wire.TTLCanaryKey, "team.backend"}
	for _, iid := range []wire.LifecycleUID{w.instance, w.other} {
		keys = append(keys, meshwire.ServiceKey(wire.ManagerEndpoint, iid, meshwire.ServiceSpecLeaf), meshwire.ServiceKey(wire.ManagerEndpoint, iid, meshwire.ServiceStatusLeaf))
	}
	for _, p := range principals {
		keys = append(keys, wire.PresenceKey(p))
	}
	// The record keys of the goal writer's, run driver's and mediator's commit paths, of the
	// manager and another endpoint, and a session ledger row and a run admission: written on the
	// authority stores only, where they live.
	var storeKeys []string
	a := w.aliceL
	for _, ep := range []wire.EndpointName{wire.ManagerEndpoint, "com.acme.search"} {
		goal := []string{a.Principal.Owner(), a.Principal.Actor(), string(a.UID), "g1"}
		storeKeys = append(storeKeys,
			meshwire.RecordKey(meshwire.RecordGoal, ep, append(goal, meshwire.RecordStatusLeaf)...),
			meshwire.RecordKey(meshwire.RecordGoalIndex, ep, goal...),
			meshwire.RecordKey(meshwire.RecordGoalEffect, ep, append(goal, "7")...),
			meshwire.RecordKey(meshwire.RecordCheckpoint, ep, "tok1", meshwire.RecordStatusLeaf),
			meshwire.RecordKey(meshwire.RecordLease, ep, "pool1", a.Principal.Owner(), a.Principal.Actor(), string(a.UID), "i1", meshwire.RecordSpecLeaf),
			meshwire.RecordKey(meshwire.RecordName, ep, "n1"),
			meshwire.RecordKey(meshwire.RecordMigrate, ep),
			meshwire.RecordKey(meshwire.RecordAnswer, ep, "tok1", "a1"),
			"dec."+ep.Token()+".x",
		)
		for _, r := range w.runs {
			storeKeys = append(storeKeys,
				meshwire.RecordKey(meshwire.RecordRun, ep, r, meshwire.RecordStatusLeaf),
				meshwire.RecordKey(meshwire.RecordNotice, ep, r, "ad1", "n1", meshwire.RecordSpecLeaf),
				meshwire.RecordKey(meshwire.RecordMigration, ep, r, "m1", meshwire.RecordSpecLeaf),
				meshwire.AdmissionKey(ep, r),
			)
		}
	}
	storeKeys = append(storeKeys, strings.TrimSuffix(meshwire.SessionLedgerKeys(), "*")+w.sessions[0].id)
	// The people ledger's rows and a remote manager's registration, in the user-auth store.
	storeKeys = append(storeKeys, "actor."+a.Principal.String(), "managed."+a.Principal.String(), "manager."+string(w.instance))
	for _, l := range lcs {
		keys = append(keys, meshwire.ACLKey(l))
		for _, ch := range []string{"general", "team.backend"} {
			keys = append(keys, fbMust(meshwire.MemberKey(ch, l)))
		}
	}
	for _, b := range fbBuckets(s) {
		bk := keys
		if slices.Contains([]wire.Bucket{meshwire.RecordsBucket(s), meshwire.AuthBucket(s), meshwire.UserAuthBucket(s), meshwire.SessionsBucket(s), meshwire.AdmissionBucket(s)}, b) {
			bk = append(slices.Clone(keys), storeKeys...)
		}
		for _, k := range bk {
			ops = append(ops,
				fbOp{op: "Publish", subject: b.Subject(k), kind: fbKVPut, space: sp, data: []byte(`"forbidden"`)},
				fbOp{op: "Publish", subject: b.Subject(k), kind: fbKVDelete, space: sp, hdr: nats.Header{jsapi.KVOperation: []string{jsapi.KVDelete}}})
		}
	}

	// The JetStream API on every stream, under every consumer name of the contract.
	names := []string{"w1", meshwire.FanoutDurable, meshwire.ReaderDurable}
	for _, l := range lcs {
		names = append(names, wire.DMDurable(l), wire.DLVDurable(l), wire.ChatHistConsumer(l))
	}
	for _, role := range w.roles {
		names = append(names, fbMust(wire.TaskDurable(role)))
	}
	for _, r := range w.runs {
		names = append(names, meshwire.WFJReplayDurable(r, w.takeover))
	}
	for _, st := range append(fbStreams(s), w.hostStreams(s)...) {
		filters, sample := w.filters(s, st)
		streamCfg := fmt.Appendf(nil, `{"name":%q,"subjects":["forbidden.%s"],"storage":"memory"}`, st, st)
		pub(fbStreamAPI, jsapi.StreamInfo+st, nil)
		pub(fbStreamAPI, jsapi.StreamCreate+st, streamCfg)
		pub(fbStreamAPI, jsapi.StreamUpdate+st, streamCfg)
		pub(fbStreamAPI, jsapi.StreamDelete+st, nil)
		pub(fbStreamAPI, jsapi.StreamPurge+st, []byte(`{}`))
		pub(fbStreamAPI, jsapi.MsgGet+st, []byte(`{"seq":1}`))
		pub(fbStreamAPI, jsapi.MsgDelete+st, []byte(`{"seq":1}`))
		pub(fbStreamAPI, jsapi.DirectGet+st, []byte(`{"seq":1}`))
		pub(fbStreamAPI, jsapi.DirectGet+st+"."+sample, nil)
		pub(fbStreamAPI, jsapi.ConsumerList+st, []byte(`{}`))
		pub(fbStreamAPI, fbConsumerNames+st, []byte(`{}`))
		pub(fbStreamAPI, fbStreamSnap+st, []byte(`{}`))
		pub(fbStreamAPI, fbStreamLeader+st, nil)
		pub(fbConsumerMake, jsapi.ConsumerCreate+st, fmt.Appendf(nil, `{"stream_name":%q,"config":{"ack_policy":"none","inactive_threshold":60000000000}}`, st))
		for _, n := range names {
			cfg := func(filter string) []byte {
				return fmt.Appendf(nil, `{"stream_name":%q,"config":{"name":%q,"filter_subject":%q,"ack_policy":"none","inactive_threshold":60000000000}}`, st, n, filter)
			}
			pub(fbConsumerMake, jsapi.ConsumerCreate+st+"."+n, cfg(""))
			for _, f := range filters {
				pub(fbConsumerMake, jsapi.ConsumerCreate+st+"."+n+"."+f, cfg(f))
			}
			pub(fbConsumerMake, jsapi.ConsumerDurable+st+"."+n, fmt.Appendf(nil, `{"stream_name":%q,"config":{"durable_name":%q,"ack_policy":"explicit"}}`, st, n))
			pub(fbConsumerAPI, jsapi.ConsumerInfo+st+"."+n, nil)
			pub(fbConsumerAPI, jsapi.ConsumerNext+st+"."+n, []byte(`{"batch":1,"no_wait":true}`))
			pub(fbConsumerAPI, jsapi.ConsumerDelete+st+"."+n, nil)
			pub(fbConsumerAPI, fbConsumerPause+st+"."+n, []byte(`{}`))
			pub(fbConsumerAPI, jsapi.Ack+st+"."+n+".1.1.1.1.0", []byte("+ACK"))
		}
	}
	mine := "MINE_" + s.Token()
	pub(fbStreamAPI, jsapi.StreamCreate+mine, fmt.Appendf(nil, `{"name":%q,"subjects":["mine.%s.>"],"storage":"memory"}`, mine, s.Token()))
	return ops
}

// filters returns the consumer filters tried on st (the whole stream, narrower ones, and for a
// bucket one outside it and one spelled relative) and a concrete subject stored on it.
func (w *fbWorld) filters(s wire.Space, st string) (filters []string, sample string) {
	switch st {
	case s.ChatStream():
		return []string{s.KindAll(wire.KindChat), fbMust(s.ChatFilter("secret")), fbMust(s.ChatFilter("general"))}, fbMust(s.ChatSubject(w.bob, "general"))
	case s.DMStream():
		return []string{s.KindAll(wire.KindInst), meshwire.DMFilter(s, w.bob), meshwire.DMFilter(s, w.alice)}, s.DMSubject(w.alice, w.bob)
	case s.TaskStream():
		return []string{s.KindAll(wire.KindSvc), fbMust(s.AnycastFilter("reviewer"))}, fbMust(s.AnycastSubject("reviewer", w.bob))
	case meshwire.InboxStream(s):
		return []string{s.KindAll(wire.KindDinbox), meshwire.DinboxSubject(s, w.bobL)}, meshwire.DinboxSubject(s, w.bobL)
	case s.DLVStream():
		return []string{s.KindAll(wire.KindDlv), meshwire.DlvSubject(s, w.aliceL)}, meshwire.DlvSubject(s, w.bobL)
	case meshwire.WFJStream(s):
		return []string{meshwire.WFJFilter(s), meshwire.WFJSubject(s, w.runs[0]), meshwire.WFJSubject(s, w.runs[1])}, meshwire.WFJSubject(s, w.runs[1])
	case meshwire.ObjectStream(meshwire.ArtifactsBucket(s)):
		o := "$O." + string(meshwire.ArtifactsBucket(s))
		return []string{o + ".>", o + ".C.>"}, o + ".M.x"
	case meshwire.ContractStream(s):
		artifact := fbMust(s.ContractSubject(fbDigest))
		return []string{s.KindAll(wire.KindEpc), artifact}, artifact
	case meshwire.TimerStream(s):
		fire := meshwire.TimerSubject(s, wire.ManagerEndpoint, w.instance, w.epoch, "t1", meshwire.TimerFire)
		return []string{s.KindAll(meshwire.KindEpt), fire}, fire
	}
	for _, iid := range []wire.LifecycleUID{w.instance, w.other} {
		if b := meshwire.TransferBucket(s, iid); meshwire.ObjectStream(b) == st {
			return []string{meshwire.ObjectAll(b), meshwire.ObjectSubject(b, meshwire.ObjectChunk, ">")}, meshwire.ObjectSubject(b, meshwire.ObjectMeta, "eA")
		}
	}
	for _, b := range fbBuckets(s) {
		if b.Stream() == st {
			outside := meshwire.ACLBucket(s)
			if b == outside {
				outside = s.PresenceBucket()
			}
			return []string{b.Subject(">"), b.Subject(wire.PresenceKey(w.bob)), b.Subject(meshwire.ServiceRegistryKeys()), outside.Subject(">"), wire.PresenceKey(w.bob)}, b.Subject(wire.PresenceKey(w.bob))
		}
	}
	panic("no filters for stream " + st)
}

// target is l as an exact or handle request's target block.
func (w *fbWorld) target(l wire.Lifecycle) wire.EndpointTarget {
	return wire.EndpointTarget{Owner: l.Principal.Owner(), Actor: l.Principal.Actor(), UID: l.UID}
}

// fbDigest is the hex digest of the matrix's contract artifact.
var fbDigest = strings.Repeat("ab", 32)

// endpointOps are the operations on the endpoint rails (SPEC §13): requests of each caller
// lifecycle in the shapes the grants tell apart (class, scatter and instance rails; untargeted,
// self, owner, any and handle; the versioned rail), the replies to each from the serving
// instance and another at two epochs, each caller's reply rail and goal progress, the event,
// fact and contract planes, and the serve filters. The callers are the world's lifecycles and
// the credential's own, whose forbidden shapes (a spawn without the capability, another owner's
// despawn, the versioned rail of a legacy instrument) are the ones its grant tells apart.
func (w *fbWorld) endpointOps(s wire.Space, lcs []wire.Lifecycle) []fbOp {
	sp := string(s)
	var ops []fbOp
	pub := func(subject string) {
		ops = append(ops, fbOp{op: "Publish", subject: subject, kind: fbPublish, space: sp, data: []byte(`{"forbidden":true}`)})
	}
	subscribe := func(subject string) {
		ops = append(ops, fbOp{op: "Subscription", subject: subject, kind: fbSubscribe, space: sp})
	}
	mgr, search := wire.ManagerEndpoint, wire.EndpointName("com.acme.search")
	one, all, inst := wire.AddressOne, wire.AddressAll, wire.AddressInst
	instances := []wire.LifecycleUID{w.instance, w.other}
	for _, l := range lcs {
		owner := func(mode wire.AuthzMode, o string) (wire.AuthzMode, wire.EndpointTarget) {
			return mode, wire.EndpointTarget{Owner: o}
		}
		ownMode, own := owner(wire.ModeOwner, l.Principal.Owner())
		_, foreign := owner(wire.ModeOwner, w.forged.Owner())
		for _, r := range []wire.EndpointRoute{
			{Address: one, Endpoint: mgr, Command: wire.CommandDescribe},
			{Address: all, Endpoint: mgr, Command: wire.CommandDescribe},
			{Address: inst, Endpoint: mgr, Instance: w.instance, Command: wire.CommandDescribe},
			{Address: inst, Endpoint: mgr, Instance: w.other, Command: wire.CommandDescribe},
			{Address: inst, Endpoint: mgr, Instance: w.instance, Command: "ps"},
			{Address: inst, Endpoint: mgr, Instance: w.other, Command: "ps"},
			{Address: inst, Endpoint: mgr, Instance: w.instance, Command: "spawn"},
			{Address: inst, Endpoint: mgr, Instance: w.instance, Command: "despawn", Mode: ownMode, Target: own},
			{Address: inst, Endpoint: mgr, Instance: w.instance, Command: "despawn", Mode: ownMode, Target: foreign},
			{Address: inst, Endpoint: mgr, Instance: w.instance, Command: "purge"},
			{Address: one, Endpoint: search, Command: wire.CommandDescribe},
			{Address: one, Endpoint: mgr, Command: "stop", Mode: wire.ModeSelf},
			{Address: one, Endpoint: mgr, Command: "spawn"},
			{Address: all, Endpoint: mgr, Command: "ps"},
			{Address: one, Endpoint: mgr, Command: "despawn", Mode: ownMode, Target: own},
			{Address: one, Endpoint: mgr, Command: "despawn", Mode: ownMode, Target: foreign},
			{Address: one, Endpoint: mgr, Command: "despawn", Mode: wire.ModeAny, Target: own},
			{Address: one, Endpoint: mgr, Command: "attach", Mode: ownMode, Target: own},
			{Address: one, Endpoint: mgr, Command: "input", Mode: wire.ModeAny, Target: own},
			{Address: all, Endpoint: mgr, Command: "spawn"},
			{Address: one, Endpoint: mgr, Command: "purge"},
			{Address: inst, Endpoint: search, Instance: w.instance, Command: "turn", Mode: wire.ModeHandle, Target: wire.EndpointTarget{Owner: w.bob.Owner(), Actor: w.bob.Actor(), UID: w.bobL.UID}},
			{Generation: foreignGeneration, Address: one, Endpoint: mgr, Command: "spawn"},
			{Address: one, Endpoint: mgr, Command: "turn", Mode: ownMode, Target: own},
			{Address: one, Endpoint: meshwire.AuthEndpoint, Command: meshwire.CommandRetireLifecycle, Mode: wire.ModeExact, Target: w.target(w.aliceL)},
			{Address: one, Endpoint: meshwire.AuthEndpoint, Command: meshwire.CommandRetireLifecycle, Mode: wire.ModeExact, Target: w.target(w.bobL)},
			{Address: one, Endpoint: meshwire.AuthEndpoint, Command: meshwire.CommandRetireLifecycle, Mode: wire.ModeHandle, Target: w.target(w.aliceL)},
		} {
			r.Caller, r.Nonce = l, "fbnonce_forbidden_00000"
			pub(fbMust(s.RequestSubject(r)))
			subscribe(s.ReplyFilter(r))
			for _, iid := range instances {
				for _, e := range []int64{w.epoch, w.epoch + 1} {
					pub(fbMust(s.ReplySubject(r, iid, e)))
				}
			}
		}
		subscribe(s.ReplyReadGrant(l, ""))
		subscribe(s.GoalProgressFilter(mgr, l))
		for _, iid := range instances {
			for _, e := range []int64{w.epoch, w.epoch + 1} {
				pub(fbMust(s.EventSubject(mgr, iid, e, wire.GoalProgressTopic(l, "g1")...)))
			}
		}
		pub(fbMust(s.FactSubject(mgr, wire.GoalResultTopic(l, "g1")...)))
		pub(fbMust(s.FactSubject(mgr, wire.GoalBindTopic(l, "g1")...)))
		pub(fbMust(s.FactSubject(search, wire.GoalResultTopic(l, "g1")...)))
		pub(fbMust(s.FactSubject(search, wire.GoalBindTopic(l, "g1")...)))
	}
	// The other fact families of a commit path, and the canonicalizer's, per endpoint; and the
	// timer subjects of each instance and epoch.
	for _, ep := range []wire.EndpointName{mgr, search} {
		for _, family := range []string{string(meshwire.FactEffect), string(meshwire.FactReceipt), string(meshwire.FactWork), string(meshwire.FactCheckpoint), "dec", "quar"} {
			pub(fbMust(s.FactSubject(ep, family, "local", "alice", "x1")))
		}
		for _, iid := range instances {
			for _, e := range []int64{w.epoch, w.epoch + 1} {
				for _, phase := range []meshwire.TimerPhase{meshwire.TimerSchedule, meshwire.TimerArmed, meshwire.TimerFire} {
					pub(meshwire.TimerSubject(s, ep, iid, e, "t1", phase))
				}
			}
		}
	}
	pub(fbMust(s.ContractSubject(fbDigest)))
	for _, ep := range []wire.EndpointName{mgr, search} {
		for _, cmd := range []string{wire.CommandDescribe, "spawn", "purge"} {
			for _, versioned := range []bool{false, true} {
				for _, iid := range instances {
					oneF, allF, instF := meshwire.ServeFilters(s, ep, iid, cmd, versioned)
					subscribe(oneF)
					subscribe(allF)
					subscribe(instF)
				}
			}
		}
	}
	subscribe(s.Prefix() + ".ep.one.manager.>")
	subscribe(s.Prefix() + ".ep.reply.>")
	subscribe(s.Prefix() + ".epe.manager.>")
	return ops
}

// globalOps name no space: the whole broker, the system account, account-wide JetStream verbs.
func (w *fbWorld) globalOps() []fbOp {
	var ops []fbOp
	for _, subj := range []string{">", "cotal.>", "cotal.*.>", "cotal.*.chat.>", "_INBOX.>", w.foreignInbox,
		"$SYS.>", "$JS.>", "$JS.API.>", "$JS.EVENT.>", "$JS.EVENT.ADVISORY.>", "$KV.>", "$O.>", "$JS.ACK.>", "$JS.FC.>"} {
		ops = append(ops, fbOp{op: "Subscription", subject: subj, kind: fbSubscribe})
	}
	js := []string{fbStreamList, fbStreamNames, "$JS.API.META.LEADER.STEPDOWN", "$JS.API.SERVER.REMOVE"}
	sys := []string{"$SYS.REQ.SERVER.PING", jsapi.ServerVarz, "$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ", "$SYS.REQ.ACCOUNT.PING.STATZ"}
	for _, acc := range w.accounts {
		js = append(js, "$JS.API.ACCOUNT.PURGE."+acc)
		sys = append(sys, jsapi.AccountConnz(acc), jsapi.AccountClaimsUpdate(acc), "$SYS.REQ.ACCOUNT."+acc+".JSZ")
	}
	for _, subj := range js {
		ops = append(ops, fbOp{op: "Publish", subject: subj, kind: fbStreamAPI, data: []byte(`{}`)})
	}
	for _, subj := range sys {
		ops = append(ops, fbOp{op: "Publish", subject: subj, kind: fbSys, data: []byte(`{}`)})
	}
	return ops
}

// fbCovers reports whether the NATS pattern p covers the subject s, both split into tokens:
// every subject s stands for is one p admits. A '*' in p covers one token, literal or '*', but
// not '>' (which stands for many).
func fbCovers(p, s []string) bool {
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) {
			return false
		}
		if tok == "*" {
			if s[i] == ">" {
				return false
			}
			continue
		}
		if s[i] != tok {
			return false
		}
	}
	return len(s) == len(p)
}

// fbNATSAdmits reports whether the broker's own matching lets pattern p admit subject s. It
// differs from fbCovers in one place: the server matches a subscription's subject token by token
// against its permission patterns, so a '*' there also takes a '>' token. A grant ending in
// "*.*" thus admits a subscription ending in "*.>", which reaches every subject beneath the
// grant (see fbGrant.knownGap).
func fbNATSAdmits(p, s []string) bool {
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && s[i] != tok) {
			return false
		}
	}
	return len(s) == len(p)
}

// knownGap reports whether o, which the SPEC forbids, is one the broker accepts as a
// subscription, and so is left out of the generated set (and logged): a subscription that puts
// '>' where the grant's last token is '*'. FOUND by this matrix: the supervisor's
// "P.live.manager.*.*" admits "P.live.manager.*.>", and the delivery daemon's
// "P.ctl.delivery.*.*", "P.ctl.delivery-admin.*.*" and "P.live.delivery.*.*" admit the same
// widening, which received every "….reply.<nonce>" answer on the rail. The profiles now carry a
// sub.deny row "P.<rail>.<svc>.*.*.>", so the broker still accepts such a subscription but drops
// every delivery beyond the filter's depth; TestServeFilterHoldsItsDepth proves that.
func (g *fbGrant) knownGap(o fbOp, s []string) bool {
	if o.op != "Subscription" || s[len(s)-1] != ">" {
		return false
	}
	for _, p := range g.csub {
		if p[len(p)-1] == "*" && fbNATSAdmits(p, s) {
			return true
		}
	}
	return false
}

// fbGrant is what the SPEC lets one credential do: publish patterns, deny patterns that beat
// them, and subscription patterns (and the same split into tokens, by compile).
type fbGrant struct {
	pub, deny, sub    []string
	cpub, cdeny, csub [][]string
	// anyStream marks a grant whose JetStream verbs and acks name no stream: they reach every
	// stream of the home space's store account, and another space's stream, which the universe
	// spells too, is not there (TestWardenReachesNoOtherSpace shows the broker finds none).
	anyStream bool
}

func (g *fbGrant) compile() {
	split := func(pats []string) (out [][]string) {
		for _, p := range pats {
			out = append(out, strings.Split(p, "."))
		}
		return out
	}
	g.cpub, g.cdeny, g.csub = split(g.pub), split(g.deny), split(g.sub)
}

// may reports whether the grant lets o through; s is o's subject split into tokens.
func (g *fbGrant) may(o fbOp, s []string) bool {
	covered := func(pats [][]string) bool {
		return slices.ContainsFunc(pats, func(p []string) bool { return fbCovers(p, s) })
	}
	if o.op == "Subscription" {
		return covered(g.csub)
	}
	return covered(g.cpub) && !covered(g.cdeny)
}

// fbCoords are the coordinates a credential was minted with, which its grant names.
type fbCoords struct {
	lifecycle      wire.Lifecycle // an agent's own
	allowPublish   []string
	allowSubscribe []string
	role           string
	target         wire.Lifecycle // a deprovisioner's
	targetChannels []string
	session        fbSession // a session party's
	run            string    // a run operator's
	capabilities   []string  // an agent's
	// serve is a supervisor's serve rows; a control instrument's lifecycle is its instrument.
	serve *authority.ServeRows
}

// foreignGeneration is a versioned-rail generation no credential of these tests was issued.
const foreignGeneration = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// fbOracle spells each profile's grant in home from the SPEC. Subjects below are written with
// P = "cotal.<home>", as the SPEC writes them.
func fbOracle(profile authority.Profile, home wire.Space, cred *authority.Credential, c fbCoords, takeover string) (fbGrant, bool) {
	P := home.Prefix() + "."
	me := cred.Principal
	o, a := me.Owner(), me.Actor()
	inbox := meshwire.InboxGrant(wire.ConnID(cred.PublicKey))
	chat, dm, task, inboxSt, dlv, wfj := home.ChatStream(), home.DMStream(), home.TaskStream(), meshwire.InboxStream(home), home.DLVStream(), meshwire.WFJStream(home)
	presence, channels, members, acl := home.PresenceBucket(), home.ChannelsBucket(), meshwire.MembersBucket(home), meshwire.ACLBucket(home)
	membership, lease, manager, records, auth := meshwire.MembershipBucket(home), meshwire.DeliveryBucket(home), meshwire.ManagerBucket(home), meshwire.RecordsBucket(home), meshwire.AuthBucket(home)
	sessions := meshwire.SessionsBucket(home)

	// A bucket watch: SPEC §9 grants CONSUMER.{CREATE,INFO,DELETE}.<KV>.>, and §13.9 pins the
	// create to one consumer name and a fully qualified filter tail inside the bucket.
	watch := func(b wire.Bucket) []string {
		st := b.Stream()
		return []string{jsapi.ConsumerCreate + st + ".*.$KV." + string(b) + ".>", jsapi.ConsumerInfo + st + ".>", jsapi.ConsumerDelete + st + ".>"}
	}
	// The generous read-and-consume scope of a host daemon on one of its own streams.
	consume := func(st string) []string {
		return []string{
			jsapi.StreamInfo + st, jsapi.MsgGet + st, jsapi.DirectGet + st, jsapi.DirectGet + st + ".>",
			jsapi.ConsumerCreate + st, jsapi.ConsumerCreate + st + ".>", jsapi.ConsumerDurable + st + ".>",
			jsapi.ConsumerInfo + st + ".>", jsapi.ConsumerNext + st + ".>", jsapi.ConsumerDelete + st + ".>",
			jsapi.Ack + st + ".>", jsapi.ConsumerList + st, fbConsumerNames + st,
		}
	}
	// The Direct Get of the contract artifacts, its subject tail fully qualified.
	epc := jsapi.DirectGet + meshwire.ContractStream(home) + "." + P + "epc.>"
	// The contract's streams of the home space, the control surface's among them (SPEC §13.12):
	// host verbs never reach a stream outside them.
	var contract []string
	contract = append(contract, fbStreams(home)...)
	contract = append(contract, meshwire.SubmissionStream(home), meshwire.TimerRequestStream(home), meshwire.TimerStream(home),
		meshwire.RecordWriteStream(home), meshwire.WorkStream(home))

	var g fbGrant
	g.sub = []string{inbox}
	// serveRows adds SPEC §13.9 serve grants of one instance at one epoch: the scatter and
	// instance rails per command (the class rail takes a queue subscription only, so a plain one
	// is forbidden), replies and events at its epoch, and, held directly rather than through
	// their mediated writers, goal results, contract artifacts and its svc records.
	serveRows := func() {
		sv := c.serve
		E, I, e := sv.Endpoint.Token(), string(sv.Instance), fmt.Sprint(sv.Epoch)
		for _, cmd := range append([]string{"describe"}, sv.Commands...) {
			for _, rail := range []string{"ep.", "ep.v1."} {
				g.sub = append(g.sub, P+rail+"all."+E+"."+cmd+".>", P+rail+"inst."+E+"."+I+"."+cmd+".>")
			}
		}
		g.pub = append(g.pub, P+"ep.reply."+E+"."+I+"."+e+".*.*.*.*", P+"ep.v1.reply."+E+"."+I+"."+e+".*.*.*.*.*",
			P+"epe."+E+"."+I+"."+e+".>", P+"epf."+E+".goal.*.*.*.*.result", P+"epc.*", epc,
			"$KV."+string(records)+".svc."+E+"."+I+".spec", "$KV."+string(records)+".svc."+E+"."+I+".status",
			jsapi.StreamInfo+records.Stream(), jsapi.MsgGet+records.Stream(),
			jsapi.ConsumerCreate+records.Stream()+".*.$KV."+string(records)+".svc."+E+"."+I+".>",
			jsapi.ConsumerInfo+records.Stream()+".>", jsapi.ConsumerDelete+records.Stream()+".>")
	}
	switch profile {
	case authority.ProfileAgent:
		// SPEC §9 and Appendix B, with the rows the reference adds and the SPEC notes accept:
		// ctl.delivery (durable join/leave/list), the two liveness planes, and the DELETE rows of
		// the bucket watches (§9 table).
		l := c.lifecycle
		hist, dmD, dlvD := wire.ChatHistConsumer(l), wire.DMDurable(l), wire.DLVDurable(l)
		for _, ch := range c.allowPublish {
			g.pub = append(g.pub, P+"chat."+o+"."+a+"."+ch)
		}
		g.pub = append(g.pub,
			P+"inst.*.*."+o+"."+a, P+"svc.*."+o+"."+a,
			P+"ctl.delivery."+o+"."+a, P+"live.manager."+o+"."+a, P+"live.delivery."+o+"."+a,
			jsapi.Info, jsapi.FlowControl,
			jsapi.StreamInfo+chat, jsapi.StreamInfo+presence.Stream(), jsapi.StreamInfo+channels.Stream(), jsapi.StreamInfo+lease.Stream(),
			jsapi.ConsumerInfo+chat+"."+hist, jsapi.ConsumerNext+chat+"."+hist, jsapi.ConsumerDelete+chat+"."+hist,
			jsapi.ConsumerInfo+dm+"."+dmD, jsapi.ConsumerNext+dm+"."+dmD, jsapi.Ack+dm+"."+dmD+".>",
			jsapi.ConsumerInfo+dlv+"."+dlvD, jsapi.ConsumerNext+dlv+"."+dlvD, jsapi.Ack+dlv+"."+dlvD+".>",
			"$KV."+string(presence)+"."+o+"."+a,
			jsapi.MsgGet+channels.Stream(), jsapi.MsgGet+lease.Stream(),
		)
		g.pub = append(g.pub, watch(presence)...)
		g.pub = append(g.pub, watch(channels)...)
		for _, ch := range c.allowSubscribe {
			g.pub = append(g.pub, jsapi.ConsumerCreate+chat+"."+hist+"."+P+"chat.*.*."+ch)
			g.sub = append(g.sub, P+"chat.*.*."+ch)
		}
		if c.role != "" {
			svc := fbMust(wire.TaskDurable(c.role))
			g.pub = append(g.pub, jsapi.StreamInfo+task, jsapi.ConsumerInfo+task+"."+svc, jsapi.ConsumerNext+task+"."+svc, jsapi.Ack+task+"."+svc+".>")
		}
		for _, x := range []string{dm, task, dlv} {
			g.deny = append(g.deny, jsapi.ConsumerCreate+x, jsapi.ConsumerCreate+x+".>", jsapi.ConsumerDurable+x+".>")
		}
		g.sub = append(g.sub, P+"ctl.delivery."+o+"."+a+".>", P+"live.manager."+o+"."+a+".>", P+"live.delivery."+o+"."+a+".>")
		// SPEC §13.9 caller grants, as the reference's baseline spells them: describe any
		// endpoint on the class rail, the contract artifacts, stop itself, its own reply rail.
		// The spawn capability adds the manager's spawn family and its goals' progress.
		cu := o + "." + a + "." + string(l.UID)
		g.pub = append(g.pub, P+"ep.one.*.describe."+cu+".*", epc, P+"ep.one.manager.stop.self."+cu+".*")
		g.sub = append(g.sub, P+"ep.reply.*.*.*."+cu+".*")
		if slices.Contains(c.capabilities, authority.CapabilitySpawn) {
			for _, cmd := range []string{"spawn", "define-persona", "inspect", "list-personas", "show-persona"} {
				g.pub = append(g.pub, P+"ep.one.manager."+cmd+"."+cu+".*")
			}
			g.pub = append(g.pub, P+"ep.one.manager.despawn.owner."+o+"."+cu+".*", P+"ep.one.manager.attach.owner."+o+"."+cu+".*")
			g.sub = append(g.sub, P+"epe.manager.*.*.goal."+cu+".>")
		}
	case authority.ProfileControlAdmin:
		// The operator's control instrument: every request form of the legacy rail on any
		// endpoint, pinned to its own instrument lifecycle; its reply rail and goals' progress;
		// the contract artifacts and the service registry (a watch pinned to svc.>).
		cu := o + "." + a + "." + string(c.lifecycle.UID)
		for _, form := range []string{"one.*.*", "one.*.*.*", "one.*.*.*.*", "one.*.*.*.*.*.*", "all.*.*", "all.*.*.*", "all.*.*.*.*", "all.*.*.*.*.*.*",
			"inst.*.*.*", "inst.*.*.*.*", "inst.*.*.*.*.*", "inst.*.*.*.*.*.*.*"} {
			g.pub = append(g.pub, P+"ep."+form+"."+cu+".*")
		}
		g.pub = append(g.pub, jsapi.Info, jsapi.FlowControl, epc, jsapi.StreamInfo+records.Stream(), jsapi.MsgGet+records.Stream(),
			jsapi.ConsumerCreate+records.Stream()+".*.$KV."+string(records)+".svc.>", jsapi.ConsumerInfo+records.Stream()+".>", jsapi.ConsumerDelete+records.Stream()+".>")
		g.sub = append(g.sub, P+"ep.reply.*.*.*."+cu+".*", P+"epe.*.*.*.goal."+cu+".>")
	case authority.ProfileObserver, authority.ProfileAdmin:
		// Appendix B: the observer's exact list; the admin adds DM history and the inst and svc
		// taps, never the ep rails.
		g.pub = []string{
			jsapi.Info, jsapi.FlowControl, jsapi.StreamInfo + chat, jsapi.StreamInfo + presence.Stream(),
			jsapi.ConsumerCreate + chat, jsapi.ConsumerCreate + chat + ".>", jsapi.ConsumerInfo + chat + ".>",
			jsapi.ConsumerNext + chat + ".>", jsapi.ConsumerDelete + chat + ".>", jsapi.Ack + chat + ".>",
			jsapi.StreamInfo + lease.Stream(), jsapi.MsgGet + lease.Stream(),
		}
		g.pub = append(g.pub, watch(presence)...)
		for _, b := range []wire.Bucket{channels, membership} {
			g.pub = append(g.pub, jsapi.StreamInfo+b.Stream(), jsapi.MsgGet+b.Stream())
			g.pub = append(g.pub, watch(b)...)
		}
		g.sub = append(g.sub, P+"chat.>")
		if profile == authority.ProfileAdmin {
			g.pub = append(g.pub, jsapi.StreamInfo+dm, jsapi.ConsumerCreate+dm, jsapi.ConsumerCreate+dm+".>", jsapi.ConsumerInfo+dm+".>",
				jsapi.ConsumerNext+dm+".>", jsapi.ConsumerDelete+dm+".>", jsapi.Ack+dm+".>")
			g.sub = append(g.sub, P+"inst.>", P+"svc.>")
		}
	case authority.ProfileSupervisor:
		// Function scope: the manager daemon's leases and presence, the caller side of the
		// delivery admin commands, the responder side of the manager liveness plane.
		g.pub = append([]string{jsapi.Info, jsapi.FlowControl, "$KV." + string(manager) + ".>", "$KV." + string(presence) + "." + o + "." + a,
			P + "ctl.delivery-admin." + o + "." + a, P + "live.manager.*.*.reply.>"},
			append(consume(manager.Stream()), consume(presence.Stream())...)...)
		g.sub = append(g.sub, P+"ctl.delivery-admin."+o+"."+a+".>", P+"live.manager.*.*")
		if c.serve != nil {
			serveRows()
		}
	case authority.ProfileEndpointServe:
		// One instance's serve rows and nothing else.
		g.pub = append(g.pub, jsapi.Info, jsapi.FlowControl)
		serveRows()
	case authority.ProfileRemoteManager:
		// Its serve gate; and, for the supervisor identity only, the instance's lease and the
		// responder side of the manager liveness plane (seed core 0.59).
		I := string(c.serve.Instance)
		g.pub = append(g.pub, jsapi.Info, "$KV."+string(auth)+".epgate."+c.serve.Endpoint.Token()+"."+I)
		if a == meshwire.RemoteManagerActorsOf(c.serve.Instance).Supervisor {
			g.pub = append(g.pub, "$KV."+string(manager)+".lease."+I, P+"live.manager.*.*.reply.>", jsapi.StreamInfo+manager.Stream(), jsapi.MsgGet+manager.Stream(), jsapi.FlowControl, jsapi.StreamInfo+presence.Stream())
			g.pub = append(g.pub, watch(presence)...)
			g.sub = append(g.sub, P+"live.manager.*.*")
		}
	case authority.ProfileGoalWriter:
		// SPEC §13.9 goal-writer row: the commit row of its endpoint (the goal result, the eff,
		// receipt, wrk and cp fact families, never dec or quar; its goal, cp, lease, goaleff and
		// epname records and the one epmig key; the leader-served EPF and records reads), plus the
		// bind leaf, the goalidx index, and the body-selected read of its own gate on the auth store.
		E := c.serve.Endpoint.Token()
		g.pub = append(g.pub, jsapi.Info, P+"epf."+E+".goal.*.*.*.*.result", P+"epf."+E+".goal.*.*.*.*.bind")
		for _, f := range []string{"eff", "receipt", "wrk", "cp"} {
			g.pub = append(g.pub, P+"epf."+E+"."+f+".>")
		}
		for _, k := range []string{"goal", "cp", "lease", "goaleff", "epname", "goalidx"} {
			g.pub = append(g.pub, "$KV."+string(records)+"."+k+"."+E+".>")
		}
		g.pub = append(g.pub, "$KV."+string(records)+".epmig."+E,
			jsapi.MsgGet+"EPF_"+string(home), jsapi.MsgGet+records.Stream(), jsapi.MsgGet+auth.Stream())
	case authority.ProfileSessionLedger:
		// The manager's session ledger: the rows of the dedicated sessions bucket and its reads,
		// nothing of the auth store (SPEC §13.9: only the trusted auth path writes it).
		g.pub = append(g.pub, jsapi.Info, "$KV."+string(sessions)+".session.*", jsapi.StreamInfo+sessions.Stream(), jsapi.MsgGet+sessions.Stream())
	case authority.ProfileTransferReader:
		// The reference's transfer reader (resume-transfer design §6), on its own instance's
		// store only, less the store create: reads, its own ordered consumers, purge, the meta
		// delete marker.
		X := "cotal_xfer_" + string(home) + "_" + string(c.serve.Instance)
		st := "OBJ_" + X
		g.pub = append(g.pub, jsapi.Info, jsapi.FlowControl, jsapi.StreamInfo+st, jsapi.MsgGet+st, jsapi.StreamPurge+st,
			jsapi.ConsumerCreate+st, jsapi.ConsumerCreate+st+".>", jsapi.ConsumerInfo+st+".>", jsapi.ConsumerDelete+st+".>", "$O."+X+".M.>")
	case authority.ProfileManagerCaller:
		// SPEC §9: only ep.inst.manager.<managerInstanceId>.<command>, with describe, its reply
		// rail and its inbox; the commands are the manager's reads, and with the spawn capability
		// the spawn family of its own owner and the cancel of its own goals.
		cu := c.lifecycle.String()
		I := P + "ep.inst.manager." + string(c.serve.Instance) + "."
		g.pub = []string{I + "describe." + cu + ".*", epc, I + "status." + cu + ".*", I + "ps." + cu + ".*", I + "inspect." + cu + ".*"}
		g.sub = append(g.sub, P+"ep.reply.*.*.*."+cu+".*")
		if slices.Contains(c.capabilities, authority.CapabilitySpawn) {
			g.pub = append(g.pub, I+"spawn."+cu+".*", I+"despawn.owner."+o+"."+cu+".*", I+"attach.owner."+o+"."+cu+".*", I+"cancel."+cu+".*")
			g.sub = append(g.sub, P+"epe.manager.*.*.goal."+cu+".>")
		}
	case authority.ProfileDeployer:
		// SPEC §10's deployer view, as the reference's privileged control tier spells it: the
		// live state a deploy plans against (roster, registry and membership feed with watches;
		// the manager and delivery leases by point read), and untargeted as its own lifecycle the
		// manager's reads, persona commands, spawn and launch, ps also scattered; its replies and
		// its own goals' progress. Nothing targeted, nothing written.
		cu := c.lifecycle.String()
		g.pub = []string{jsapi.Info, jsapi.FlowControl, P + "ep.one.*.describe." + cu + ".*", epc, P + "ep.all.manager.ps." + cu + ".*"}
		for _, b := range []wire.Bucket{presence, channels, membership, manager, lease} {
			g.pub = append(g.pub, jsapi.StreamInfo+b.Stream(), jsapi.MsgGet+b.Stream(), jsapi.DirectGet+b.Stream()+".$KV."+string(b)+".>")
		}
		for _, b := range []wire.Bucket{presence, channels, membership} {
			g.pub = append(g.pub, watch(b)...)
		}
		for _, cmd := range []string{"status", "ps", "inspect", "models", "list-personas", "show-persona", "spawn", "define-persona", "launch"} {
			g.pub = append(g.pub, P+"ep.one.manager."+cmd+"."+cu+".*")
		}
		g.sub = append(g.sub, P+"ep.reply.*.*.*."+cu+".*", P+"epe.manager.*.*.goal."+cu+".>")
	case authority.ProfileRetirementRequester:
		// SPEC §13.9 retirement requester rows: its one exact-mode retire-lifecycle request for
		// its one target, the describe row and the contract read; its own reply rail.
		cu := c.lifecycle.String()
		g.pub = []string{P + "ep.one.auth.retire-lifecycle.exact." + c.target.String() + "." + cu + ".*", P + "ep.one.*.describe." + cu + ".*", epc}
		g.sub = append(g.sub, P+"ep.reply.*.*.*."+cu+".*")
	case authority.ProfileRunDriver:
		// SPEC §14.6: the one journal subject, the takeover's replay durable, and the commit path of
		// its run's run, notice and migration records and its endpoint's answers. No admission row.
		E, R := c.serve.Endpoint.Token(), c.run
		d := meshwire.WFJReplayDurable(R, takeover)
		rec := "$KV." + string(records) + "."
		g.pub = []string{jsapi.Info, P + "wfj." + R,
			jsapi.ConsumerCreate + wfj + "." + d + "." + P + "wfj." + R, jsapi.ConsumerInfo + wfj + "." + d, jsapi.ConsumerNext + wfj + "." + d,
			jsapi.ConsumerDelete + wfj + "." + d, jsapi.Ack + wfj + "." + d + ".>",
			rec + "run." + E + "." + R + ".spec", rec + "run." + E + "." + R + ".status", rec + "notice." + E + "." + R + ".>",
			// Not the SPEC's: cotal-go keeps the run's program beside its record, for a takeover.
			rec + "run." + E + "." + R + ".program",
			rec + "migration." + E + "." + R + ".>", rec + "answer." + E + ".>"}
	case authority.ProfileRunAdmitter:
		// SPEC §14.8 / Appendix B: the creates of its run's admission record and revocation
		// marker, two exact keys of the admission store, and nothing else.
		admission := "$KV.cotal_admission_" + string(home) + "."
		E, R := c.serve.Endpoint.Token(), c.run
		g.pub = []string{admission + "admission.v1." + E + "." + R, admission + "revoked.v1." + E + "." + R}
	case authority.ProfileRunMediator:
		// SPEC §14.8 admission read (§13.9 row) and, as the trusted host of one run attempt, its
		// function scope: the records reads, its endpoint's checkpoint plane at its instance and
		// epoch, channel waits (CHAT reads), the presence roster, conclave registry writes, and
		// describe, spawn, turn and despawn of its own owner's agents as the run's caller.
		E, I, e := c.serve.Endpoint.Token(), string(c.serve.Instance), fmt.Sprint(c.serve.Epoch)
		cu := c.lifecycle.String()
		g.pub = []string{jsapi.Info, jsapi.FlowControl,
			jsapi.MsgGet + "KV_cotal_admission_" + string(home), jsapi.MsgGet + records.Stream(),
			"$KV." + string(records) + ".cp." + E + ".>", P + "epf." + E + ".cp.>", jsapi.MsgGet + "EPF_" + string(home),
			P + "ept." + E + "." + I + "." + e + ".*.schedule", jsapi.MsgGet + "EPT_" + string(home),
			jsapi.StreamInfo + chat, jsapi.MsgGet + chat, jsapi.ConsumerCreate + chat + ".>", jsapi.ConsumerInfo + chat + ".>",
			jsapi.ConsumerNext + chat + ".>", jsapi.ConsumerDelete + chat + ".>", jsapi.Ack + chat + ".>",
			jsapi.StreamInfo + presence.Stream(),
			"$KV." + string(channels) + ".>", jsapi.MsgGet + channels.Stream(), "$KV." + string(members) + ".>", jsapi.MsgGet + members.Stream(),
			P + "ep.one.*.describe." + cu + ".*", P + "ep.one." + E + ".spawn." + cu + ".*",
			P + "ep.one." + E + ".turn.owner." + o + "." + cu + ".*", P + "ep.one." + E + ".despawn.owner." + o + "." + cu + ".*", epc}
		g.pub = append(g.pub, watch(presence)...)
		g.sub = append(g.sub, P+"ep.reply.*.*.*."+cu+".*")
	case authority.ProfileDelivery:
		// Function scope: fan-out from CHAT through INBOX to DLV, re-authorisation against the
		// presence, registry, membership and ACL rows, its lease, serving its control services
		// and the delivery liveness plane.
		g.pub = []string{jsapi.Info, jsapi.FlowControl, jsapi.MsgDelete + inboxSt,
			"$KV." + string(members) + ".>", "$KV." + string(lease) + ".>", "$KV." + string(acl) + ".>",
			P + "dinbox.*.*.*", P + "dlv.*.*.*",
			P + "ctl.delivery.*.*.reply.>", P + "ctl.delivery-admin.*.*.reply.>", P + "live.delivery.*.*.reply.>"}
		for _, st := range []string{chat, inboxSt, dlv, presence.Stream(), channels.Stream(), members.Stream(), acl.Stream(), lease.Stream()} {
			g.pub = append(g.pub, consume(st)...)
		}
		g.sub = append(g.sub, P+"ctl.delivery.*.*", P+"ctl.delivery-admin.*.*", P+"live.delivery.*.*")
	case authority.ProfileProvisioner:
		// Function scope: create and reconcile the space's streams and buckets, pre-create the
		// lifecycle durables, seed the ACL, registry and membership rows.
		g.pub = []string{jsapi.Info, jsapi.FlowControl}
		for _, st := range contract {
			g.pub = append(g.pub, jsapi.StreamCreate+st, jsapi.StreamInfo+st, jsapi.StreamUpdate+st)
		}
		for _, st := range []string{dm, dlv, task} {
			g.pub = append(g.pub, consume(st)...)
		}
		for _, b := range []wire.Bucket{acl, channels, members} {
			g.pub = append(g.pub, "$KV."+string(b)+".>", jsapi.MsgGet+b.Stream(), jsapi.DirectGet+b.Stream(), jsapi.DirectGet+b.Stream()+".>")
		}
		// The trust anchors (SPEC §13.10): the operator registers them and reads them back.
		g.pub = append(g.pub, records.Subject(meshwire.SignerKeys()), jsapi.MsgGet+records.Stream())
	case authority.ProfileDeprovisioner:
		// SPEC §13.9 / Appendix B host profiles: pinned to one (principal, lifecycleUid) in every
		// exact name; deletes only its dm_/dlv_ durables, its read-ACL row and one membership
		// row per named channel. Reading those (INFO, MSG.GET) is allowed generously.
		t := c.target
		g.pub = []string{jsapi.Info,
			jsapi.ConsumerDelete + dm + "." + wire.DMDurable(t), jsapi.ConsumerInfo + dm + "." + wire.DMDurable(t),
			jsapi.ConsumerDelete + dlv + "." + wire.DLVDurable(t), jsapi.ConsumerInfo + dlv + "." + wire.DLVDurable(t),
			jsapi.StreamInfo + acl.Stream(), jsapi.MsgGet + acl.Stream(), "$KV." + string(acl) + "." + meshwire.ACLKey(t),
			jsapi.StreamInfo + members.Stream(), jsapi.MsgGet + members.Stream(),
		}
		for _, ch := range c.targetChannels {
			g.pub = append(g.pub, "$KV."+string(members)+"."+fbMust(meshwire.MemberKey(ch, t)))
		}
	case authority.ProfileOperator:
		// The CLI's one-shot send: post, message and hand out tasks as itself, its own presence,
		// reading presence and the registry (watches, point and Direct Get with a qualified tail).
		g.pub = []string{P + "chat." + o + "." + a + ".>", P + "inst.*.*." + o + "." + a, P + "svc.*." + o + "." + a,
			"$KV." + string(presence) + "." + o + "." + a, jsapi.Info, jsapi.FlowControl,
			jsapi.StreamInfo + presence.Stream(), jsapi.StreamInfo + channels.Stream(), jsapi.MsgGet + channels.Stream(),
			jsapi.DirectGet + channels.Stream() + ".$KV." + string(channels) + ".>"}
		g.pub = append(g.pub, watch(presence)...)
		g.pub = append(g.pub, watch(channels)...)
	case authority.ProfileProbe:
		// Only proves that it connects.
	case authority.ProfileChannelWriter:
		g.pub = append([]string{jsapi.Info, jsapi.FlowControl, "$KV." + string(channels) + ".>",
			jsapi.StreamCreate + channels.Stream(), jsapi.StreamUpdate + channels.Stream()}, consume(channels.Stream())...)
	case authority.ProfilePurger:
		g.pub = []string{jsapi.Info, jsapi.StreamPurge + chat, jsapi.StreamPurge + dm, jsapi.StreamInfo + chat, jsapi.StreamInfo + dm}
	case authority.ProfileTeardown:
		// Deletes the space's streams and buckets (and clears the registry and chat history on
		// the way); reads what it tears down.
		g.pub = []string{jsapi.Info, jsapi.FlowControl, jsapi.StreamPurge + chat, jsapi.StreamPurge + dm, "$KV." + string(channels) + ".>"}
		for _, st := range contract {
			g.pub = append(g.pub, jsapi.StreamInfo+st, jsapi.StreamDelete+st)
		}
		g.pub = append(g.pub, consume(presence.Stream())...)
		g.pub = append(g.pub, consume(channels.Stream())...)
	case authority.ProfileLedger:
		// The authority's own credential on the auth store and the user-auth store (and,
		// generously, the session rows).
		userauth := meshwire.UserAuthBucket(home)
		g.pub = []string{jsapi.Info, jsapi.FlowControl, "$KV." + string(auth) + ".>", "$KV." + string(userauth) + ".>", "$KV." + string(sessions) + ".>"}
		for _, b := range []wire.Bucket{auth, userauth, sessions} {
			g.pub = append(g.pub, consume(b.Stream())...)
		}
	case authority.ProfileSessionCaller, authority.ProfileSessionServing:
		// SPEC §13.6: one party publishes on one rail of its session and reads the other.
		in, out := c.session.rail(home, meshwire.SessionIn), c.session.rail(home, meshwire.SessionOut)
		if profile == authority.ProfileSessionServing {
			in, out = out, in
		}
		g.pub = []string{in}
		g.sub = append(g.sub, out)
	case authority.ProfileRunOperator:
		// SPEC §14.3, §14.8 and Appendix B: the leader-served reads of the run records and of the
		// admission store, and a read-only replay of one run's journal through its own durable.
		d := meshwire.WFJReplayDurable(c.run, takeover)
		g.pub = []string{jsapi.Info, jsapi.MsgGet + records.Stream(), jsapi.MsgGet + "KV_cotal_admission_" + string(home),
			jsapi.ConsumerCreate + wfj + "." + d + "." + meshwire.WFJSubject(home, c.run),
			jsapi.ConsumerInfo + wfj + "." + d, jsapi.ConsumerNext + wfj + "." + d, jsapi.ConsumerDelete + wfj + "." + d, jsapi.Ack + wfj + "." + d + ".>"}
	case authority.ProfileWarden:
		// The integrity warden: audits the API, consumes and repairs every stream and bucket of
		// its space, never a stream's life cycle; its one messaging subject is the DM below. Its
		// stream verbs name any stream: the space account's JetStream is its own store's, so
		// another space's stream is not there to reach (TestWardenReachesNoOtherSpace).
		g.pub = append([]string{jsapi.Info, jsapi.FlowControl, jsapi.MsgDelete + "*"}, consume("*")...)
		g.anyStream = true
		for _, b := range fbBuckets(home) {
			g.pub = append(g.pub, "$KV."+string(b)+".>")
		}
		// Not the SPEC's: the warden tells the sender of a message it deleted why, in a DM sent
		// as itself, to anyone.
		g.pub = append(g.pub, P+"inst.*.*."+o+"."+a)
		g.sub = append(g.sub, jsapi.AuditAdvisory, jsapi.ConsumerDeletedAdvs)
	case authority.ProfileMembership:
		// The membership feed's writer (SPEC §8): it writes the feed and reads the durable
		// memberships it reports, nothing else.
		g.pub = []string{jsapi.Info, jsapi.FlowControl, "$KV." + string(membership) + ".>"}
		for _, b := range []wire.Bucket{membership, members} {
			g.pub = append(g.pub, consume(b.Stream())...)
		}
	default:
		return fbGrant{}, false
	}
	return g, true
}

// fbCred is one credential of the matrix.
type fbCred struct {
	name     string
	profile  authority.Profile
	home     wire.Space
	cred     *authority.Credential
	coords   fbCoords
	grant    fbGrant
	controls []fbOp // operations the SPEC allows, which must not be refused
	client   *meshtest.Client
	ops      []fbOp // the generated forbidden operations

	mu      sync.Mutex
	refused int
}

// fbBatch bounds the operations sent between two settles, so the recorded refusals stay small.
const fbBatch = 1000

// attempt sends batch on c, settles, and returns the operations the broker did not refuse and
// the refusals that match no operation of the batch (one refusal matches one operation).
func fbAttempt(c *meshtest.Client, sink chan *nats.Msg, batch []fbOp) (notRefused []fbOp, unexpected []string, err error) {
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, o := range batch {
		switch o.op {
		case "Publish":
			err = c.PublishMsg(&nats.Msg{Subject: o.subject, Header: o.hdr, Data: o.data})
		case "Subscription":
			var s *nats.Subscription
			s, err = c.ChanSubscribe(o.subject, sink)
			subs = append(subs, s)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", o.op, o.subject, err)
		}
	}
	errs, err := c.Settle()
	if err != nil {
		return nil, nil, err
	}
	want := map[string]int{}
	for _, o := range batch {
		want[o.key()]++
	}
	for _, e := range errs {
		op, subject, ok := meshtest.ParseViolation(e)
		k := op + " " + subject
		if !ok || want[k] == 0 {
			unexpected = append(unexpected, e.Error())
			continue
		}
		want[k]--
	}
	for _, o := range batch {
		if want[o.key()] > 0 {
			want[o.key()]--
			notRefused = append(notRefused, o)
		}
	}
	return notRefused, unexpected, nil
}

// fbStreamState is what a stream's JSZ entry tells about what was done to it.
type fbStreamState struct {
	Config json.RawMessage
	Msgs   uint64
	First  uint64
	Last   uint64
	Cons   []string
	TTL    bool // max_age expires messages during the test, so Msgs and First may move alone
}

// fbSnapshot returns every stream of each account, from the broker's own JetStream report.
func fbSnapshot(t *testing.T, nc *nats.Conn, accounts []string) map[string]fbStreamState {
	t.Helper()
	out := map[string]fbStreamState{}
	for _, acc := range accounts {
		msg, err := nc.Request("$SYS.REQ.ACCOUNT."+acc+".JSZ", []byte(`{"streams":true,"consumer":true,"config":true}`), 10*time.Second)
		if err != nil {
			t.Fatalf("jsz of %s: %v", acc, err)
		}
		var resp struct {
			Data struct {
				Streams []struct {
					Name   string          `json:"name"`
					Config json.RawMessage `json:"config"`
					State  struct {
						Msgs  uint64 `json:"messages"`
						First uint64 `json:"first_seq"`
						Last  uint64 `json:"last_seq"`
					} `json:"state"`
					Consumers []struct {
						Name string `json:"name"`
					} `json:"consumer_detail"`
				} `json:"stream_detail"`
			} `json:"data"`
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error != nil {
			t.Fatalf("jsz of %s: %v %+v", acc, err, resp.Error)
		}
		for _, s := range resp.Data.Streams {
			var cfg struct {
				MaxAge int64 `json:"max_age"`
			}
			_ = json.Unmarshal(s.Config, &cfg)
			st := fbStreamState{Config: s.Config, Msgs: s.State.Msgs, First: s.State.First, Last: s.State.Last, TTL: cfg.MaxAge > 0 && cfg.MaxAge < int64(time.Hour)}
			for _, c := range s.Consumers {
				st.Cons = append(st.Cons, c.Name)
			}
			slices.Sort(st.Cons)
			out[acc+"/"+s.Name] = st
		}
	}
	return out
}

// TestForbiddenOperationsAtScale generates, per profile, the operations the SPEC forbids it,
// attempts every one on a real broker serving two spaces, and requires that the broker refused
// each: 0 succeed. It also confirms from the broker's JetStream report that nothing was stored,
// deleted, purged, created or reconfigured, and that a few allowed operations per credential
// are not refused.
func TestForbiddenOperationsAtScale(t *testing.T) {
	meshtest.Long(t, "hundreds of thousands of operations at the broker")
	t.Parallel()
	start := time.Now()
	m := meshtest.Start(t, meshtest.WithSpaces("main", "other"))
	ctx := t.Context()
	kr := m.Keyring()

	w := &fbWorld{
		spaces:   []wire.Space{"main", "other"},
		alice:    fbPrincipal("local.alice"),
		bob:      fbPrincipal("local.bob"),
		forged:   fbPrincipal("u_bbbbbbbbbbbbbbbbbbbbbbbbbb.alice"),
		channels: []string{"general", "team.backend", "team", "secret", "ops.alerts"},
		roles:    []string{"reviewer", "builder"},
		runs:     []string{"r-1", "r-2"},
		takeover: "tk1",
		sessions: []fbSession{
			{"search", "sess_forbiddenforbidden0", 1},
			{"search", "sess_forbiddenforbidden0", 2},
			{"search", "sess_forbiddenforbidden1", 1},
		},
		foreignInbox: meshwire.InboxGrant(wire.NewConnID()),
		instance:     wire.NewLifecycleUID(),
		other:        wire.NewLifecycleUID(),
		epoch:        3,
	}
	for _, s := range w.spaces {
		sk, err := kr.Space(s)
		if err != nil {
			t.Fatal(err)
		}
		w.accounts = append(w.accounts, sk.AccountPublicKey(), sk.StorePublicKey())
		w.stores = append(w.stores, sk.StorePublicKey())
	}

	// The credentials: every profile in main, and the handed profiles again in other.
	agentReq := ledger.Request{Name: "alice", Subscribe: []string{"team.backend", "general"}, AllowSubscribe: []string{"team.>", "general"},
		AllowPublish: []string{"team.backend"}, Role: "reviewer"}
	var creds []*fbCred
	mint := func(home wire.Space, p authority.Profile, name string, g authority.Grant, coords fbCoords) {
		var cred *authority.Credential
		switch {
		case p == authority.ProfileAgent:
			req := agentReq
			req.Space = home
			cred = m.AgentCred(t, req)
			coords = fbCoords{lifecycle: wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID},
				allowPublish: req.AllowPublish, allowSubscribe: req.AllowSubscribe, role: req.Role}
		case g.Principal.IsZero():
			// Every credential outlives the run, which takes minutes on a loaded machine: a probe
			// or run operator's default minute would end its connection before its controls.
			cred = m.Mint(t, ledger.Request{Space: home, Profile: p, Name: name, Expires: fbLifetime})
			if p == authority.ProfileControlAdmin {
				// Its instrument lifecycle is fresh at the mint; the SDK reads it off the creds.
				parsed, err := cotal.ParseCreds(cred.Creds)
				if err != nil {
					t.Fatal(err)
				}
				coords.lifecycle = wire.Lifecycle{Principal: cred.Principal, UID: parsed.Lifecycle}
			}
		default:
			sk, err := kr.Space(home)
			if err != nil {
				t.Fatal(err)
			}
			if cred, err = sk.Mint(authority.MintRequest{Profile: p, Grant: g, Expires: fbLifetime}); err != nil {
				t.Fatalf("mint %s: %v", p, err)
			}
		}
		creds = append(creds, &fbCred{name: string(p) + "@" + string(home), profile: p, home: home, cred: cred, coords: coords})
	}
	mint("main", authority.ProfileAgent, "", authority.Grant{}, fbCoords{})
	w.aliceL = creds[0].coords.lifecycle
	w.aliceOld = wire.Lifecycle{Principal: w.alice, UID: wire.NewLifecycleUID()}
	w.bobL = wire.Lifecycle{Principal: w.bob, UID: wire.NewLifecycleUID()}

	sess := w.sessions[0]
	// The coordinates of the host-issued profiles: the manager instance at the matrix's epoch it
	// acts for, the manager's serve identity as a caller, and the run caller of the matrix's run.
	at := &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: w.instance, Epoch: w.epoch}
	managerCaller := wire.Lifecycle{Principal: fbPrincipal("local." + meshwire.RemoteManagerActorsOf(w.instance).Serve), UID: wire.NewLifecycleUID()}
	runCaller := wire.Lifecycle{Principal: fbPrincipal("local.wf_0123456789ab"), UID: wire.NewLifecycleUID()}
	for _, p := range authority.Profiles {
		switch p {
		case authority.ProfileAgent:
		case authority.ProfileDeprovisioner:
			g := authority.Grant{Principal: fbPrincipal("local.deprovisioner"), Target: w.aliceL, Channels: []string{"team.backend"}}
			mint("main", p, "", g, fbCoords{target: w.aliceL, targetChannels: g.Channels})
		case authority.ProfileSessionCaller, authority.ProfileSessionServing:
			g := authority.Grant{Principal: fbPrincipal("local.search1"), Session: authority.SessionRails{Endpoint: sess.endpoint, SessionID: sess.id, Epoch: sess.epoch}}
			if p == authority.ProfileSessionCaller {
				g.Principal = w.alice
			}
			mint("main", p, "", g, fbCoords{session: sess})
		case authority.ProfileRunOperator:
			g := authority.Grant{Principal: fbPrincipal("local.runop"), Run: authority.RunReplay{RunID: w.runs[0], TakeoverID: w.takeover}}
			mint("main", p, "", g, fbCoords{run: w.runs[0]})
		case authority.ProfileRemoteManager:
			// Both identities: the supervisor, which answers the liveness plane, and the
			// executor, which may not.
			actors := meshwire.RemoteManagerActorsOf(w.instance)
			serve := &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: w.instance}
			for _, actor := range []string{actors.Supervisor, actors.Executor} {
				mint("main", p, "", authority.Grant{Principal: fbPrincipal("local." + actor), Serve: serve}, fbCoords{serve: serve})
				creds[len(creds)-1].name = string(p) + "/" + actor + "@main"
			}
		case authority.ProfileEndpointServe:
			serve := &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: w.instance, Epoch: w.epoch, Commands: []string{"spawn", "ps", "stop"}}
			mint("main", p, "", authority.Grant{Principal: fbPrincipal("local." + meshwire.RemoteManagerActorsOf(w.instance).Serve), Serve: serve}, fbCoords{serve: serve})
		case authority.ProfileGoalWriter, authority.ProfileTransferReader:
			actor := meshwire.RemoteManagerActorsOf(w.instance).GoalWriter
			if p == authority.ProfileTransferReader {
				actor = meshwire.RemoteManagerActorsOf(w.instance).Serve
			}
			mint("main", p, "", authority.Grant{Principal: fbPrincipal("local." + actor), Serve: at}, fbCoords{serve: at})
		case authority.ProfileSessionLedger:
			mint("main", p, "", authority.Grant{Principal: fbPrincipal("local." + meshwire.RemoteManagerActorsOf(w.instance).SessionLedger)}, fbCoords{})
		case authority.ProfileRetirementRequester:
			// The manager's serve identity, as the caller of one retirement of the matrix's agent.
			g := authority.Grant{Principal: managerCaller.Principal, LifecycleUID: managerCaller.UID, Target: w.aliceL}
			mint("main", p, "", g, fbCoords{lifecycle: managerCaller, target: w.aliceL})
		case authority.ProfileManagerCaller:
			// A person's view of the matrix's instance, with the spawn capability; the forged
			// principal's owner is another person's.
			person := wire.Lifecycle{Principal: fbPrincipal("u_cccccccccccccccccccccccccc.carol"), UID: wire.NewLifecycleUID()}
			caps := []string{authority.CapabilitySpawn}
			g := authority.Grant{Principal: person.Principal, LifecycleUID: person.UID, Serve: at, Capabilities: caps}
			mint("main", p, "", g, fbCoords{lifecycle: person, serve: at, capabilities: caps})
		case authority.ProfileDeployer:
			// A person's deployer view, of another person's owner than the matrix's agents.
			person := wire.Lifecycle{Principal: fbPrincipal("u_dddddddddddddddddddddddddd.dave"), UID: wire.NewLifecycleUID()}
			mint("main", p, "", authority.Grant{Principal: person.Principal, LifecycleUID: person.UID}, fbCoords{lifecycle: person})
		case authority.ProfileRunAdmitter:
			g := authority.Grant{Principal: runCaller.Principal, Serve: at, Run: authority.RunReplay{RunID: w.runs[0]}}
			mint("main", p, "", g, fbCoords{serve: at, run: w.runs[0]})
		case authority.ProfileRunDriver, authority.ProfileRunMediator:
			g := authority.Grant{Principal: runCaller.Principal, Serve: at, Run: authority.RunReplay{RunID: w.runs[0], TakeoverID: w.takeover}}
			coords := fbCoords{serve: at, run: w.runs[0]}
			if p == authority.ProfileRunMediator {
				g.LifecycleUID, coords.lifecycle = runCaller.UID, runCaller
			}
			mint("main", p, "", g, coords)
		default:
			mint("main", p, "fb_"+strings.ReplaceAll(string(p), "-", "_"), authority.Grant{}, fbCoords{})
		}
	}
	for _, p := range authority.Handed {
		mint("other", p, "fb_"+strings.ReplaceAll(string(p), "-", "_"), authority.Grant{}, fbCoords{})
	}
	// The endpoint variants: an agent with the spawn capability, and a supervisor serving the
	// manager endpoint at the matrix's instance and epoch.
	carolReq := ledger.Request{Space: "main", Name: "carol", Capabilities: []string{authority.CapabilitySpawn}}
	carol := m.AgentCred(t, carolReq)
	creds = append(creds, &fbCred{name: "agent+spawn@main", profile: authority.ProfileAgent, home: "main", cred: carol,
		coords: fbCoords{lifecycle: wire.Lifecycle{Principal: carol.Principal, UID: carol.LifecycleUID}, capabilities: carolReq.Capabilities}})
	serve := &authority.ServeRows{Endpoint: wire.ManagerEndpoint, Instance: w.instance, Epoch: w.epoch, Commands: []string{"spawn", "ps", "stop"}}
	mint("main", authority.ProfileSupervisor, "", authority.Grant{Principal: fbPrincipal("local.fb_manager"), Serve: serve}, fbCoords{serve: serve})
	creds[len(creds)-1].name = "supervisor+serve@main"

	// Generate: each credential's forbidden set is the universe less what its grant allows.
	var gaps []string
	for _, c := range creds {
		g, ok := fbOracle(c.profile, c.home, c.cred, c.coords, w.takeover)
		if !ok {
			t.Fatalf("profile %s has no oracle: spell its SPEC grant in fbOracle", c.profile)
		}
		g.compile()
		c.grant = g
		for _, o := range w.universe(c.cred.Principal, c.coords.lifecycle) {
			s := strings.Split(o.subject, ".")
			switch {
			case g.may(o, s):
				if o.space != "" && o.space != string(c.home) && !(g.anyStream && o.op != "Subscription" && strings.HasPrefix(o.subject, "$JS.")) {
					t.Fatalf("the oracle of %s allows %s %s in another space", c.name, o.op, o.subject)
				}
			case g.knownGap(o, s):
				gaps = append(gaps, c.name+": "+o.op+" "+o.subject)
			default:
				c.ops = append(c.ops, o)
			}
		}
		c.controls = fbControls(c, w)
		for _, o := range c.controls {
			if !g.may(o, strings.Split(o.subject, ".")) {
				t.Fatalf("the oracle of %s forbids its own positive control %s %s", c.name, o.op, o.subject)
			}
		}
		c.client = m.Connect(t, c.cred)
	}
	fbRequireEndpointRows(t, creds, w)

	// The broker's own inventory of both accounts, before and after: a system user asks JSZ.
	sys, err := kr.MintSystemUser("fb-jsz", []string{"$SYS.REQ.ACCOUNT.*.JSZ"}, nil, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	snc, err := dial.As(ctx, m.URL(), sys)
	if err != nil {
		t.Fatal(err)
	}
	defer snc.Close()
	before := fbSnapshot(t, snc, w.stores)
	if len(before) == 0 {
		t.Fatal("the broker reports no stream in the spaces' accounts")
	}
	setup := time.Since(start)

	attemptStart := time.Now()
	t.Run("attempts", func(t *testing.T) {
		for _, c := range creds {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				sink := make(chan *nats.Msg, 1024)
				for i := 0; i < len(c.ops); i += fbBatch {
					batch := c.ops[i:min(i+fbBatch, len(c.ops))]
					notRefused, unexpected, err := fbAttempt(c.client, sink, batch)
					if err != nil {
						t.Fatalf("batch at %d: %v", i, err)
					}
					for _, o := range notRefused {
						t.Errorf("NOT REFUSED: %s may not %s %s (%s), and the broker let it", c.name, o.op, o.subject, o.kind)
					}
					for _, e := range unexpected {
						t.Errorf("an error that matches no attempt: %s", e)
					}
					c.mu.Lock()
					c.refused += len(batch) - len(notRefused)
					c.mu.Unlock()
				}
				if n := len(sink); n > 0 {
					t.Errorf("a refused subscription delivered %d messages", n)
				}
				if s := c.client.Status(); s != nats.CONNECTED {
					t.Errorf("the broker dropped the connection after its refusals: %s", s)
				}
			})
		}
	})
	attemptTime := time.Since(attemptStart)

	// Nothing happened: no stream created, deleted, reconfigured, written, purged; no message
	// deleted; no consumer created or deleted.
	after := fbSnapshot(t, snc, w.stores)
	for _, k := range slices.Sorted(maps.Keys(before)) {
		b, ok := after[k]
		a := before[k]
		switch {
		case !ok:
			t.Errorf("stream %s is gone", k)
		case string(a.Config) != string(b.Config):
			t.Errorf("stream %s was reconfigured:\n%s\n%s", k, a.Config, b.Config)
		case a.Last != b.Last:
			t.Errorf("stream %s stored messages: last seq %d -> %d", k, a.Last, b.Last)
		case !a.TTL && (a.Msgs != b.Msgs || a.First != b.First):
			t.Errorf("stream %s lost messages: %d msgs from %d -> %d from %d", k, a.Msgs, a.First, b.Msgs, b.First)
		case !slices.Equal(a.Cons, b.Cons):
			t.Errorf("stream %s consumers changed: %q -> %q", k, a.Cons, b.Cons)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("stream %s was created", k)
		}
	}
	consumers := 0
	for _, st := range after {
		consumers += len(st.Cons)
	}
	t.Logf("the broker's inventory of both accounts is unchanged by the attempts: %d streams, %d consumers", len(after), consumers)

	// Positive controls, after the inventory (some of them store a message).
	t.Run("controls", func(t *testing.T) {
		for _, c := range creds {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				sink := make(chan *nats.Msg, 1024)
				notRefused, unexpected, err := fbAttempt(c.client, sink, c.controls)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range c.controls {
					if !slices.ContainsFunc(notRefused, func(n fbOp) bool { return n.key() == o.key() }) {
						t.Errorf("REFUSED: %s may %s %s, and the broker refused it", c.name, o.op, o.subject)
					}
				}
				for _, e := range unexpected {
					t.Errorf("an error that matches no control: %s", e)
				}
			})
		}
	})

	// The count.
	total, refused, byKind, bySpace, byProfile := 0, 0, map[string]int{}, map[string]int{}, map[authority.Profile]int{}
	for _, c := range creds {
		refused += c.refused
		byProfile[c.profile] += len(c.ops)
		per := map[string]int{}
		for _, o := range c.ops {
			per[o.kind]++
			byKind[o.kind]++
			sp := o.space
			switch {
			case sp == "":
				sp = "no space"
			case sp == string(c.home):
				sp = "own space"
			default:
				sp = "other space"
			}
			bySpace[sp]++
		}
		total += len(c.ops)
		var parts []string
		for _, k := range fbKinds {
			parts = append(parts, fmt.Sprintf("%s %d", k, per[k]))
		}
		t.Logf("%-24s %5d forbidden, %5d refused, %d controls allowed (%s)", c.name, len(c.ops), c.refused, len(c.controls), strings.Join(parts, ", "))
	}
	var parts []string
	for _, p := range authority.Profiles {
		parts = append(parts, fmt.Sprintf("%s %d", p, byProfile[p]))
	}
	t.Logf("by profile: %s", strings.Join(parts, ", "))
	parts = nil
	for _, k := range fbKinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	t.Logf("by kind: %s", strings.Join(parts, ", "))
	t.Logf("by space: own %d, other %d, none %d", bySpace["own space"], bySpace["other space"], bySpace["no space"])
	t.Logf("TOTAL: %d forbidden operations over %d credentials of %d profiles, each attempted on the broker: %d refused, %d succeeded (setup %s, attempts %s)",
		total, len(creds), len(authority.Profiles), refused, total-refused, setup.Round(time.Millisecond), attemptTime.Round(time.Millisecond))
	for _, gap := range gaps {
		t.Logf("left out (a known gap the broker allows, see fbGrant.knownGap): %s", gap)
	}
	if total < 5000 {
		t.Errorf("the matrix generated %d forbidden operations; it must generate at least 5000", total)
	}
	for _, k := range fbKinds {
		if byKind[k] == 0 {
			t.Errorf("the matrix generated no %s operation", k)
		}
	}
}

// fbRequireEndpointRows checks that the generated sets hold the forbidden operations the endpoint
// grants exist to refuse, so the matrix attempts each on the broker: an agent without the spawn
// capability spawning, an agent with it despawning another owner's agent or in any mode, a control
// instrument reading an agent's reply rail or calling on the versioned rail, a serving manager
// subscribing its class rail without the queue or answering at another epoch or as another
// instance.
func fbRequireEndpointRows(t *testing.T, creds []*fbCred, w *fbWorld) {
	t.Helper()
	s := wire.Space("main")
	mgr := wire.ManagerEndpoint
	request := func(caller wire.Lifecycle, r wire.EndpointRoute) fbOp {
		r.Caller, r.Nonce = caller, "fbnonce_forbidden_00000"
		return fbOp{op: "Publish", subject: fbMust(s.RequestSubject(r))}
	}
	byName := map[string]*fbCred{}
	for _, c := range creds {
		byName[c.name] = c
	}
	carol := byName["agent+spawn@main"].coords.lifecycle
	ctl := byName["control-caller-admin@main"].coords.lifecycle
	retirer := byName["retirement-requester@main"].coords.lifecycle
	caller := byName["manager-caller@main"].coords.lifecycle
	deployer := byName["deployer@main"].coords.lifecycle
	answered := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn", Caller: w.aliceL, Nonce: "fbnonce_forbidden_00000"}
	oneRail, _, _ := meshwire.ServeFilters(s, mgr, w.instance, "spawn", false)
	for name, want := range map[string][]fbOp{
		"agent@main": {request(w.aliceL, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn"})},
		"agent+spawn@main": {
			request(carol, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "despawn", Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: w.forged.Owner()}}),
			request(carol, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "despawn", Mode: wire.ModeAny, Target: wire.EndpointTarget{Owner: carol.Principal.Owner()}}),
			request(carol, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "purge"}),
		},
		"control-caller-admin@main": {
			{op: "Subscription", subject: s.ReplyReadGrant(w.aliceL, "")},
			request(ctl, wire.EndpointRoute{Generation: foreignGeneration, Address: wire.AddressOne, Endpoint: mgr, Command: "spawn"}),
			request(w.aliceL, wire.EndpointRoute{Address: wire.AddressAll, Endpoint: mgr, Command: "ps"}),
		},
		"retirement-requester@main": {
			request(retirer, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: meshwire.AuthEndpoint, Command: meshwire.CommandRetireLifecycle, Mode: wire.ModeExact, Target: w.target(w.bobL)}),
			request(retirer, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: meshwire.AuthEndpoint, Command: meshwire.CommandRetireLifecycle, Mode: wire.ModeHandle, Target: w.target(w.aliceL)}),
			request(w.aliceL, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: meshwire.AuthEndpoint, Command: meshwire.CommandRetireLifecycle, Mode: wire.ModeExact, Target: w.target(w.aliceL)}),
		},
		"manager-caller@main": {
			request(caller, wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: w.other, Command: wire.CommandDescribe}),
			request(caller, wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: w.other, Command: "ps"}),
			request(caller, wire.EndpointRoute{Address: wire.AddressAll, Endpoint: mgr, Command: "ps"}),
			request(caller, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn"}),
			request(caller, wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: w.instance, Command: "purge"}),
			request(caller, wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: w.instance, Command: "despawn", Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: w.forged.Owner()}}),
			request(w.aliceL, wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: w.instance, Command: "ps"}),
		},
		"deployer@main": {
			request(deployer, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "despawn", Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: deployer.Principal.Owner()}}),
			request(deployer, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "attach", Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: deployer.Principal.Owner()}}),
			request(deployer, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "input", Mode: wire.ModeAny, Target: wire.EndpointTarget{Owner: deployer.Principal.Owner()}}),
			request(deployer, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "purge"}),
			request(deployer, wire.EndpointRoute{Address: wire.AddressAll, Endpoint: mgr, Command: "spawn"}),
			request(deployer, wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: w.instance, Command: "spawn"}),
			request(w.aliceL, wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn"}),
			{op: "Publish", subject: s.PresenceBucket().Subject(wire.PresenceKey(deployer.Principal))},
		},
		"transfer-reader@main": {
			{op: "Publish", subject: jsapi.StreamCreate + meshwire.ObjectStream(meshwire.TransferBucket(s, w.instance))},
			{op: "Publish", subject: jsapi.StreamInfo + meshwire.ObjectStream(meshwire.TransferBucket(s, w.other))},
		},
		"goal-writer@main": {
			{op: "Publish", subject: fbMust(s.FactSubject("com.acme.search", wire.GoalBindTopic(w.aliceL, "g1")...))},
			{op: "Publish", subject: fbMust(s.FactSubject(mgr, "dec", "local", "alice", "x1"))},
		},
		"run-driver@main": {
			{op: "Publish", subject: meshwire.WFJSubject(s, w.runs[1])},
			{op: "Publish", subject: jsapi.MsgGet + meshwire.AdmissionBucket(s).Stream()},
		},
		"supervisor+serve@main": {
			{op: "Subscription", subject: oneRail},
			{op: "Publish", subject: fbMust(s.ReplySubject(answered, w.instance, w.epoch+1))},
			{op: "Publish", subject: fbMust(s.ReplySubject(answered, w.other, w.epoch))},
		},
	} {
		c := byName[name]
		for _, o := range want {
			if !slices.ContainsFunc(c.ops, func(g fbOp) bool { return g.key() == o.key() }) {
				t.Errorf("the forbidden set of %s lacks %s %s", name, o.op, o.subject)
			}
		}
	}
}

// fbControls are a credential's positive controls: operations its grant allows, which the
// broker must not refuse. They run after the inventory, so a control may store a message.
func fbControls(c *fbCred, w *fbWorld) []fbOp {
	h := c.home
	me := c.cred.Principal
	pub := func(s string) fbOp { return fbOp{op: "Publish", subject: s, data: []byte(`{}`)} }
	sub := func(s string) fbOp { return fbOp{op: "Subscription", subject: s} }
	out := []fbOp{sub(wire.ConnID(c.cred.PublicKey).InboxPrefix() + ".x")}
	request := func(r wire.EndpointRoute) string {
		r.Caller, r.Nonce = c.coords.lifecycle, wire.NewNonce()
		return fbMust(h.RequestSubject(r))
	}
	mgr := wire.ManagerEndpoint
	switch {
	case c.profile == authority.ProfileAgent && len(c.coords.capabilities) > 0:
		out = append(out, pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn"})),
			pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "despawn", Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: me.Owner()}})),
			sub(h.GoalProgressFilter(mgr, c.coords.lifecycle)), sub(h.ReplyReadGrant(c.coords.lifecycle, "")))
		return out
	case c.profile == authority.ProfileRemoteManager:
		gate := pub(meshwire.AuthBucket(h).Subject("epgate.manager." + string(c.coords.serve.Instance)))
		if me.Actor() == meshwire.RemoteManagerActorsOf(c.coords.serve.Instance).Supervisor {
			return append(out, gate, sub(meshwire.LivenessServeFilter(h, wire.PlaneManager)), pub(meshwire.ManagerBucket(h).Subject(meshwire.ManagerLeaseKey(c.coords.serve.Instance))))
		}
		return append(out, gate)
	case (c.profile == authority.ProfileSupervisor || c.profile == authority.ProfileEndpointServe) && c.coords.serve != nil:
		sv := c.coords.serve
		_, all, inst := meshwire.ServeFilters(h, sv.Endpoint, sv.Instance, "spawn", true)
		answered := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn", Caller: w.aliceL, Nonce: wire.NewNonce()}
		out = append(out, sub(all), sub(inst), pub(fbMust(h.ReplySubject(answered, sv.Instance, sv.Epoch))),
			pub(fbMust(h.EventSubject(mgr, sv.Instance, sv.Epoch, wire.GoalProgressTopic(w.aliceL, "g1")...))))
		return out
	case c.profile == authority.ProfileGoalWriter:
		return append(out, pub(fbMust(h.FactSubject(mgr, wire.GoalBindTopic(w.aliceL, "g1")...))),
			pub(meshwire.RecordsBucket(h).Subject(meshwire.RecordKey(meshwire.RecordGoalIndex, mgr, w.aliceL.Principal.Owner(), w.aliceL.Principal.Actor(), string(w.aliceL.UID), "g1"))),
			pub(jsapi.MsgGet+meshwire.AuthBucket(h).Stream()))
	case c.profile == authority.ProfileSessionLedger:
		return append(out, pub(meshwire.SessionsBucket(h).Subject(strings.TrimSuffix(meshwire.SessionLedgerKeys(), "*")+w.sessions[0].id)),
			pub(jsapi.MsgGet+meshwire.SessionsBucket(h).Stream()))
	case c.profile == authority.ProfileTransferReader:
		b := meshwire.TransferBucket(h, c.coords.serve.Instance)
		return append(out, pub(jsapi.StreamInfo+meshwire.ObjectStream(b)), pub(meshwire.ObjectSubject(b, meshwire.ObjectMeta, "eA")))
	case c.profile == authority.ProfileRetirementRequester:
		return append(out,
			pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: meshwire.AuthEndpoint, Command: meshwire.CommandRetireLifecycle, Mode: wire.ModeExact, Target: w.target(c.coords.target)})),
			pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: meshwire.AuthEndpoint, Command: wire.CommandDescribe})),
			sub(h.ReplyReadGrant(c.coords.lifecycle, "")))
	case c.profile == authority.ProfileManagerCaller:
		inst := c.coords.serve.Instance
		return append(out, pub(request(wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: inst, Command: "ps"})),
			pub(request(wire.EndpointRoute{Address: wire.AddressInst, Endpoint: mgr, Instance: inst, Command: "despawn", Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: me.Owner()}})),
			sub(h.GoalProgressFilter(mgr, c.coords.lifecycle)), sub(h.ReplyReadGrant(c.coords.lifecycle, "")))
	case c.profile == authority.ProfileDeployer:
		presence := h.PresenceBucket()
		return append(out, pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "launch"})),
			pub(request(wire.EndpointRoute{Address: wire.AddressAll, Endpoint: mgr, Command: "ps"})),
			pub(jsapi.MsgGet+meshwire.ManagerBucket(h).Stream()), pub(jsapi.DirectGet+presence.Stream()+"."+presence.Subject(wire.PresenceKey(w.alice))),
			sub(h.GoalProgressFilter(mgr, c.coords.lifecycle)), sub(h.ReplyReadGrant(c.coords.lifecycle, "")))
	case c.profile == authority.ProfileRunDriver:
		return append(out, pub(meshwire.WFJSubject(h, c.coords.run)),
			pub(meshwire.RecordsBucket(h).Subject(meshwire.RecordKey(meshwire.RecordRun, mgr, c.coords.run, meshwire.RecordStatusLeaf))))
	case c.profile == authority.ProfileRunAdmitter:
		return append(out, pub(meshwire.AdmissionBucket(h).Subject(meshwire.AdmissionKey(mgr, c.coords.run))))
	case c.profile == authority.ProfileRunMediator:
		return append(out, pub(jsapi.MsgGet+meshwire.AdmissionBucket(h).Stream()),
			pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "spawn"})),
			sub(h.ReplyReadGrant(c.coords.lifecycle, "")))
	case c.profile == authority.ProfileControlAdmin:
		out = append(out, pub(request(wire.EndpointRoute{Address: wire.AddressAll, Endpoint: mgr, Command: "ps"})),
			pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "despawn", Mode: wire.ModeAny, Target: wire.EndpointTarget{Owner: "local"}})),
			sub(h.ReplyReadGrant(c.coords.lifecycle, "")), pub(jsapi.MsgGet+meshwire.RecordsBucket(h).Stream()))
		return out
	}
	switch c.profile {
	case authority.ProfileAgent:
		out = append(out, pub(fbMust(h.ChatSubject(me, "team.backend"))), pub(h.DMSubject(w.bob, me)),
			pub(fbMust(h.AnycastSubject("builder", me))), sub(fbMust(h.ChatFilter("general"))), sub(fbMust(h.ChatFilter("team.backend"))),
			pub(jsapi.Info), pub(jsapi.StreamInfo+h.ChatStream()), pub(h.PresenceBucket().Subject(wire.PresenceKey(me))),
			pub(jsapi.ConsumerCreate+h.ChatStream()+"."+wire.ChatHistConsumer(c.coords.lifecycle)+"."+fbMust(h.ChatFilter("general"))),
			pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: "com.acme.search", Command: wire.CommandDescribe})),
			pub(request(wire.EndpointRoute{Address: wire.AddressOne, Endpoint: mgr, Command: "stop", Mode: wire.ModeSelf})),
			sub(h.ReplyReadGrant(c.coords.lifecycle, "")))
	case authority.ProfileObserver:
		out = append(out, sub(h.KindAll(wire.KindChat)), pub(jsapi.StreamInfo+h.ChatStream()), pub(jsapi.MsgGet+h.ChannelsBucket().Stream()))
	case authority.ProfileAdmin:
		out = append(out, sub(h.KindAll(wire.KindInst)), sub(h.KindAll(wire.KindSvc)), pub(jsapi.StreamInfo+h.DMStream()))
	case authority.ProfileSupervisor:
		out = append(out, sub(meshwire.LivenessServeFilter(h, wire.PlaneManager)), pub(wire.ReplySubject(h.LivenessSubject(wire.PlaneManager, w.alice), "n1")),
			pub(jsapi.StreamInfo+meshwire.ManagerBucket(h).Stream()))
	case authority.ProfileDelivery:
		out = append(out, sub(meshwire.ControlServeFilter(h, wire.ControlDelivery)), pub(meshwire.DinboxSubject(h, w.bobL)), pub(jsapi.StreamInfo+meshwire.InboxStream(h)))
	case authority.ProfileProvisioner:
		out = append(out, pub(jsapi.StreamInfo+h.ChatStream()), pub(jsapi.ConsumerInfo+h.DMStream()+"."+wire.DMDurable(w.aliceL)))
	case authority.ProfileDeprovisioner:
		out = append(out, pub(jsapi.StreamInfo+meshwire.ACLBucket(h).Stream()), pub(jsapi.Info))
	case authority.ProfileOperator:
		out = append(out, pub(fbMust(h.ChatSubject(me, "general"))), pub(h.DMSubject(w.bob, me)), pub(jsapi.MsgGet+h.ChannelsBucket().Stream()))
	case authority.ProfileChannelWriter:
		out = append(out, pub(jsapi.StreamInfo+h.ChannelsBucket().Stream()), pub(jsapi.Info))
	case authority.ProfilePurger:
		out = append(out, pub(jsapi.Info), pub(jsapi.StreamPurge+h.DMStream()))
	case authority.ProfileTeardown:
		out = append(out, pub(jsapi.Info), pub(jsapi.StreamInfo+h.ChatStream()))
	case authority.ProfileLedger:
		out = append(out, pub(jsapi.StreamInfo+meshwire.AuthBucket(h).Stream()), pub(jsapi.Info))
	case authority.ProfileSessionCaller:
		out = append(out, pub(c.coords.session.rail(h, meshwire.SessionIn)), sub(c.coords.session.rail(h, meshwire.SessionOut)))
	case authority.ProfileSessionServing:
		out = append(out, pub(c.coords.session.rail(h, meshwire.SessionOut)), sub(c.coords.session.rail(h, meshwire.SessionIn)))
	case authority.ProfileRunOperator:
		out = append(out, pub(jsapi.Info), pub(jsapi.MsgGet+meshwire.RecordsBucket(h).Stream()))
	case authority.ProfileWarden:
		out = append(out, sub(jsapi.AuditAdvisory), pub(jsapi.StreamInfo+h.ChatStream()))
	case authority.ProfileMembership:
		out = append(out, pub(jsapi.Info), pub(jsapi.StreamInfo+meshwire.MembershipBucket(h).Stream()))
	}
	return out
}
