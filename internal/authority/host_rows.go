package authority

import (
	"fmt"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The rows of the credentials a host issues beside a serving instance (SPEC §13.6, §13.9, §14):
// a remote manager's goal writer and session ledger, its transfer reader and retirement
// requester, and the driver and mediator of a workflow run it hosts. Every row is pinned to the
// coordinates the grant names (an endpoint, an instance, a run, a caller, a target); no wildcard
// spans an instance, actor, owner, endpoint, record kind, digest or credential id.

// cmdTurn is the manager command a run relays a turn to one of its seats with.
const cmdTurn = "turn"

// validateRemote checks the coordinates of the host-issued profiles: a run's id and takeover,
// a retirement's target, and that a transfer reader names a manager instance.
func (g *Grant) validateRemote(profile Profile) error {
	switch profile {
	case ProfileRunAdmitter:
		if err := meshwire.ValidateRunID(g.Run.RunID); err != nil {
			return fmt.Errorf("the %s profile names its run: %w", profile, err)
		}
		if g.Run.TakeoverID != "" {
			return &wire.ValidationError{Field: "takeoverId", Value: g.Run.TakeoverID, Rule: "a run admitter writes a run's admission, which no takeover changes"}
		}
	case ProfileRunDriver, ProfileRunMediator:
		if err := meshwire.ValidateRunID(g.Run.RunID); err != nil {
			return fmt.Errorf("the %s profile names its run: %w", profile, err)
		}
		if err := meshwire.ValidateTakeoverID(g.Run.TakeoverID); err != nil {
			return fmt.Errorf("the %s profile names its takeover: %w", profile, err)
		}
	case ProfileRetirementRequester:
		if g.Target.Principal.IsZero() {
			return &wire.ValidationError{Field: "target", Rule: "a retirement requester names the lifecycle it retires"}
		}
		if _, err := wire.ParseLifecycleUID(string(g.Target.UID)); err != nil {
			return fmt.Errorf("target: %w", err)
		}
		// A manager retires its own owner's lifecycles only (SPEC §13.9: descendants are
		// same-owner), so no requester reaches across owners.
		if g.Target.Principal.Owner() != g.Principal.Owner() {
			return &wire.ValidationError{Field: "target", Value: g.Target.String(), Rule: "must be a lifecycle of the requester's own owner"}
		}
	case ProfileTransferReader, ProfileManagerCaller:
		if g.Serve.Endpoint != wire.ManagerEndpoint {
			return &wire.ValidationError{Field: "serve", Value: string(g.Serve.Endpoint), Rule: fmt.Sprintf("a %s names a manager instance", profile)}
		}
	}
	return nil
}

// namesInstance reports whether p's rows are pinned to an endpoint instance (Grant.Serve) it
// acts for without serving it.
func (p Profile) namesInstance() bool {
	switch p {
	case ProfileGoalWriter, ProfileTransferReader, ProfileRunDriver, ProfileRunMediator, ProfileRunAdmitter, ProfileManagerCaller:
		return true
	}
	return false
}

// goalWriter is the goal-writer profile (SPEC §13.9, the goal-writer row): the commit path of
// one endpoint (its goal results and the enumerated fact families, never dec or quar; its goal,
// checkpoint, lease, goaleff, epname and epmig records; the leader-served reads of the facts and
// records), plus the goal bind leaf, the goalidx reconcile index of the endpoint, and the
// currency read of its own issuance gate. That read is body-selected: the auth store serves no
// Direct Get, so the row reaches every gate and ledger row's metadata, never a bearer, the
// named residual of the SPEC row. It holds no records consumer: the index sweep runs elsewhere.
func (r rowsFor) goalWriter() Permissions {
	e := r.Serve.Endpoint
	records := meshwire.RecordsBucket(r.s)
	pub := []string{jsapi.Info, meshwire.GoalResultGrant(r.s, e), meshwire.GoalBindGrant(r.s, e)}
	for _, f := range []meshwire.FactFamily{meshwire.FactEffect, meshwire.FactReceipt, meshwire.FactWork, meshwire.FactCheckpoint} {
		pub = append(pub, meshwire.FactFamilyGrant(r.s, e, f))
	}
	for _, k := range []meshwire.RecordKind{meshwire.RecordGoal, meshwire.RecordCheckpoint, meshwire.RecordLease, meshwire.RecordGoalEffect, meshwire.RecordName, meshwire.RecordGoalIndex} {
		pub = append(pub, records.Subject(meshwire.RecordKey(k, e, ">")))
	}
	pub = append(pub,
		records.Subject(meshwire.RecordKey(meshwire.RecordMigrate, e)),
		jsapi.MsgGet+meshwire.FactStream(r.s), jsapi.MsgGet+records.Stream(), jsapi.MsgGet+meshwire.AuthBucket(r.s).Stream(),
	)
	return Permissions{PubAllow: pub, SubAllow: []string{r.inbox()}}
}

// sessionLedger is the session-ledger profile: the rows of the dedicated sessions bucket
// (session.<sessionId>, one token, so any session's row: the rows carry state and credential
// ids, never session bytes) and that bucket's info and leader-served reads. It holds no session
// rail and nothing of the auth store, whose session rows only the trusted auth path writes
// (SPEC §13.6, §13.9).
func (r rowsFor) sessionLedger() Permissions {
	b := meshwire.SessionsBucket(r.s)
	return Permissions{
		PubAllow: []string{jsapi.Info, b.Subject(meshwire.SessionLedgerKeys()), jsapi.StreamInfo + b.Stream(), jsapi.MsgGet + b.Stream()},
		SubAllow: []string{r.inbox()},
	}
}

// transferReader is the transfer-reader profile (reference docs/design/resume-transfer.md §6):
// on the one manager instance's own transfer store, its info and point reads, the ordered
// consumers the stock object get reads through (which deliver to the reader's own inbox), the
// purge and the meta delete marker a whole removal writes. Every row names the instance's
// stream, so a reader reaches no other instance's transfers and no other store. It may not
// create the store: a create's body chooses the stream's subjects, so the grant would let it
// capture any subject of the account no stream captures yet.
func (r rowsFor) transferReader() Permissions {
	b := meshwire.TransferBucket(r.s, r.Serve.Instance)
	st := meshwire.ObjectStream(b)
	return Permissions{
		PubAllow: []string{
			jsapi.Info, jsapi.StreamInfo + st, jsapi.MsgGet + st, jsapi.StreamPurge + st,
			jsapi.ConsumerCreate + st, jsapi.ConsumerCreate + st + ".>", jsapi.ConsumerInfo + st + ".>", jsapi.ConsumerDelete + st + ".>",
			jsapi.FlowControl, meshwire.ObjectMetaGrant(b),
		},
		SubAllow: []string{r.inbox()},
	}
}

// retirementRequester is the retirement-requester profile (SPEC §13.9, the two retirement
// requester rows): the one retire-lifecycle request of its caller for its one target, the
// target triple pinned in exact mode (SPEC §13.2: pinned by the owning profile, no handle
// artifact) so the nonce is its only wildcard; describe of any endpoint and the contract
// artifacts, so a generic client can resolve the auth endpoint first; and its own reply rail.
func (r rowsFor) retirementRequester() Permissions {
	c, t := r.lifecycle(), r.Target
	retire := meshwire.RequestGrant(r.s, c, "", wire.AddressOne,
		meshwire.AuthEndpoint.Token(), meshwire.CommandRetireLifecycle, string(wire.ModeExact), t.Principal.Owner(), t.Principal.Actor(), string(t.UID))
	return Permissions{
		PubAllow: []string{retire, meshwire.RequestGrant(r.s, c, "", wire.AddressOne, "*", wire.CommandDescribe), r.contractRead()},
		SubAllow: []string{r.inbox(), r.s.ReplyReadGrant(c, "")},
	}
}

// replayRows are the rows of one run's journal replay through the takeover's own durable
// (SPEC §14.4): created filtered to the run's subject, bound, acked and deleted by name.
func (r rowsFor) replayRows() []string {
	wfj, durable := meshwire.WFJStream(r.s), meshwire.WFJReplayDurable(r.Run.RunID, r.Run.TakeoverID)
	return []string{
		jsapi.ConsumerCreate + wfj + "." + durable + "." + meshwire.WFJSubject(r.s, r.Run.RunID),
		jsapi.ConsumerInfo + wfj + "." + durable,
		jsapi.ConsumerNext + wfj + "." + durable,
		jsapi.Ack + wfj + "." + durable + ".>",
		jsapi.ConsumerDelete + wfj + "." + durable,
	}
}

// runDriver is the run-driver profile (SPEC §14.6): the append on exactly its run's journal
// subject, the takeover's replay durable, and the commit path of its run's own records on its
// endpoint: the run record's two halves, its notices and migrations, and the endpoint's answers
// (keyed by checkpoint token, which no run id pins: the same residual as the commit path's).
// Its reads and effects ride the run mediator; it holds no admission row (SPEC §13.9).
func (r rowsFor) runDriver() Permissions {
	e, run := r.Serve.Endpoint, r.Run.RunID
	records := meshwire.RecordsBucket(r.s)
	pub := append([]string{jsapi.Info, meshwire.WFJSubject(r.s, run)}, r.replayRows()...)
	pub = append(pub,
		records.Subject(meshwire.RecordKey(meshwire.RecordRun, e, run, meshwire.RecordSpecLeaf)),
		records.Subject(meshwire.RecordKey(meshwire.RecordRun, e, run, meshwire.RecordStatusLeaf)),
		records.Subject(meshwire.RecordKey(meshwire.RecordRun, e, run, meshwire.RecordProgramLeaf)),
		records.Subject(meshwire.RecordKey(meshwire.RecordNotice, e, run, ">")),
		records.Subject(meshwire.RecordKey(meshwire.RecordMigration, e, run, ">")),
		records.Subject(meshwire.RecordKey(meshwire.RecordAnswer, e, ">")),
	)
	return Permissions{PubAllow: pub, SubAllow: []string{r.inbox()}}
}

// runAdmitter is the run admitter's rows: the create of its run's admission record and of its
// revocation marker, two exact keys of the admission store (the store refuses a second write to
// either), and its reply inbox for the acknowledgement.
func (r rowsFor) runAdmitter() Permissions {
	admission, e := meshwire.AdmissionBucket(r.s), r.Serve.Endpoint
	return Permissions{
		PubAllow: []string{admission.Subject(meshwire.AdmissionKey(e, r.Run.RunID)), admission.Subject(meshwire.RevocationKey(e, r.Run.RunID))},
		SubAllow: []string{r.inbox()},
	}
}

// runMediator is the run-mediator profile, the trusted host side of one run attempt: the
// leader-served reads of the admission store (SPEC §13.9, §14.8) and of the records; the
// checkpoint plane of its endpoint (checkpoint records and settle facts, the fact read, the
// schedule requests of its attempt's instance and epoch, the timer read); the channel waits of
// SPEC §14.8 (CHAT reads through per-step consumers) and the presence roster; a conclave's
// registry and membership writes; and, as the run's own caller, describe, spawn, and turn and
// despawn of its owner's agents on its endpoint, with its reply rail. The stream-wide rows
// (the point reads, the CHAT consumers, the registries) are the named residuals of a trusted
// host profile: SPEC §14.8 has the host check every channel effect against the admitted ceiling.
func (r rowsFor) runMediator() Permissions {
	sv, c := r.Serve, r.lifecycle()
	e, o := sv.Endpoint, c.Principal.Owner()
	records, chat := meshwire.RecordsBucket(r.s), r.s.ChatStream()
	presence, channels, members := r.s.PresenceBucket(), r.s.ChannelsBucket(), meshwire.MembersBucket(r.s)
	one := func(route ...string) string { return meshwire.RequestGrant(r.s, c, "", wire.AddressOne, route...) }
	pub := []string{
		jsapi.Info,
		jsapi.MsgGet + meshwire.AdmissionBucket(r.s).Stream(), jsapi.MsgGet + records.Stream(),
		records.Subject(meshwire.RecordKey(meshwire.RecordCheckpoint, e, ">")), meshwire.FactFamilyGrant(r.s, e, meshwire.FactCheckpoint),
		jsapi.MsgGet + meshwire.FactStream(r.s), meshwire.TimerScheduleGrant(r.s, e, sv.Instance, sv.Epoch), jsapi.MsgGet + meshwire.TimerStream(r.s),
		jsapi.StreamInfo + chat, jsapi.MsgGet + chat,
		jsapi.ConsumerCreate + chat + ".>", jsapi.ConsumerInfo + chat + ".>", jsapi.ConsumerNext + chat + ".>", jsapi.ConsumerDelete + chat + ".>", jsapi.Ack + chat + ".>",
		jsapi.StreamInfo + presence.Stream(), watchCreate(presence), jsapi.ConsumerInfo + presence.Stream() + ".>", jsapi.ConsumerDelete + presence.Stream() + ".>",
		jsapi.FlowControl,
		channels.Subject(">"), jsapi.MsgGet + channels.Stream(), members.Subject(">"), jsapi.MsgGet + members.Stream(),
		one("*", wire.CommandDescribe),
		one(e.Token(), cmdSpawn),
		one(e.Token(), cmdTurn, string(wire.ModeOwner), o),
		one(e.Token(), cmdDespawn, string(wire.ModeOwner), o),
		r.contractRead(),
	}
	return Permissions{PubAllow: pub, SubAllow: []string{r.inbox(), r.s.ReplyReadGrant(c, "")}}
}
