package meshwire

import "github.com/gocotal/cotal/wire"

// The rails (token 2 of a subject) that only the mesh's services and endpoints publish on; the
// rails a client uses are package wire's.
const (
	KindEpj   wire.SubjectKind = "epj"   // journal-class submissions: epj.<endpoint>.<command>[.<mode>...].<caller>
	KindEpr   wire.SubjectKind = "epr"   // record writes: epr.<endpoint>.<instanceId>.<epoch>.<kind>.<qualifier...>
	KindEpt   wire.SubjectKind = "ept"   // timers: ept.<endpoint>.<instanceId>.<epoch>.<timerId>.<schedule|armed|fire>
	KindEpw   wire.SubjectKind = "epw"   // work items: epw.<endpoint>.<pool>.<cOwner>.<cActor>.<cUid>.<id>
	KindEps   wire.SubjectKind = "eps"   // session rails: eps.<endpoint>.<sessionId>.<epoch>.<in|out>
	KindWfj   wire.SubjectKind = "wfj"   // workflow journal: wfj.<runId>
	KindTrace wire.SubjectKind = "trace" // reserved: trace.<instance>
)
