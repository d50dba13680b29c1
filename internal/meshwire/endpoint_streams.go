package meshwire

import "github.com/gocotal/cotal/wire"

// The control surface's ingress and work streams (SPEC §13.12) beside the event, fact and
// contract planes: raw journal-class submissions, timer requests (and EPT, the timers they arm,
// TimerStream), record-write requests and the work pools. A space is provisioned with all of
// them, with the reference's configurations, so an endpoint of either implementation that uses
// journal-class commands, timers or pools finds them.

// The five streams' name prefixes beside EPT's; the space token follows.
const (
	epjStreamPrefix    = "EPJ_"
	eptReqStreamPrefix = "EPT_REQ_"
	eprStreamPrefix    = "EPR_"
	epwStreamPrefix    = "EPW_"
)

// SubmissionStream returns "EPJ_<space>", the untrusted log of journal-class submissions
// (cotal.<space>.epj.>) a canonicalizer reads.
func SubmissionStream(s wire.Space) string { return epjStreamPrefix + s.Token() }

// TimerRequestStream returns "EPT_REQ_<space>", the timer requests endpoint instances publish
// (cotal.<space>.ept.*.*.*.*.schedule); it schedules nothing itself.
func TimerRequestStream(s wire.Space) string { return eptReqStreamPrefix + s.Token() }

// RecordWriteStream returns "EPR_<space>", the record-write requests (cotal.<space>.epr.>) the
// record writers consume.
func RecordWriteStream(s wire.Space) string { return eprStreamPrefix + s.Token() }

// WorkStream returns "EPW_<space>", the work pools' queue (cotal.<space>.epw.>).
func WorkStream(s wire.Space) string { return epwStreamPrefix + s.Token() }

// TimerFilter returns the subjects of every timer's phase: across endpoints, instances, epochs
// and timers.
func TimerFilter(s wire.Space, phase TimerPhase) string {
	return s.Prefix() + "." + string(KindEpt) + ".*.*.*.*." + string(phase)
}
