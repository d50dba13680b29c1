// Package jsapi names the NATS server's own subjects that Cotal grants, requests and listens
// to: the JetStream API verbs (each a prefix its stream or stream.consumer tail follows), its
// flow-control, acknowledgement and advisory subjects, and the system account's requests. They
// are the server's contract, not Cotal's, so they live here rather than in wire; each is spelled
// once.
package jsapi

// JetStream API verbs. A verb ending in "." takes the stream name, and for consumer verbs
// ".<consumer>", after it.
const (
	Info                = "$JS.API.INFO"
	StreamCreate        = "$JS.API.STREAM.CREATE."
	StreamUpdate        = "$JS.API.STREAM.UPDATE."
	StreamInfo          = "$JS.API.STREAM.INFO."
	StreamDelete        = "$JS.API.STREAM.DELETE."
	StreamPurge         = "$JS.API.STREAM.PURGE."
	MsgGet              = "$JS.API.STREAM.MSG.GET."
	MsgDelete           = "$JS.API.STREAM.MSG.DELETE."
	DirectGet           = "$JS.API.DIRECT.GET."
	ConsumerCreate      = "$JS.API.CONSUMER.CREATE."
	ConsumerDurable     = "$JS.API.CONSUMER.DURABLE.CREATE."
	ConsumerInfo        = "$JS.API.CONSUMER.INFO."
	ConsumerNext        = "$JS.API.CONSUMER.MSG.NEXT."
	ConsumerDelete      = "$JS.API.CONSUMER.DELETE."
	ConsumerList        = "$JS.API.CONSUMER.LIST."
	FlowControl         = "$JS.FC.>"
	Ack                 = "$JS.ACK."
	AuditAdvisory       = "$JS.EVENT.ADVISORY.API"
	ConsumerDeletedAdvs = "$JS.EVENT.ADVISORY.CONSUMER.DELETED.>"
)

// JetStream API error codes (the err_code of an API reply's error).
const (
	// ErrCodeNoMessage is the error code of a message get that found nothing.
	ErrCodeNoMessage = 10037
	// ErrCodeSequenceNotFound answers a message delete of a sequence a memory stream does not
	// hold.
	ErrCodeSequenceNotFound = 10043
	// ErrCodeMsgDeleteFailed answers a message delete the stream refused or its store failed;
	// the description says which. A file stream that does not hold the sequence answers it with
	// StoreNoMessage, or StoreEOF past its last sequence.
	ErrCodeMsgDeleteFailed = 10057
)

// Descriptions a stream's store gives the errors of ErrCodeMsgDeleteFailed that mean the message
// is not there.
const (
	StoreNoMessage = "no message found"
	StoreEOF       = "stream store EOF"
)

// System account requests.
const (
	// ServerVarz asks every server for its VARZ.
	ServerVarz = "$SYS.REQ.SERVER.PING.VARZ"
	// ServerStatsPing asks every server of a cluster for its statistics, its routes among them;
	// each answers on the reply subject.
	ServerStatsPing = "$SYS.REQ.SERVER.PING.STATSZ"
)

// AccountClaimsUpdate returns the subject that pushes a new JWT for account.
func AccountClaimsUpdate(account string) string {
	return "$SYS.REQ.ACCOUNT." + account + ".CLAIMS.UPDATE"
}

// AccountClaimsLookup returns the subject every server of a cluster with the distributed
// resolver answers with the JWT of account it holds (an empty reply when it holds none).
func AccountClaimsLookup(account string) string {
	return "$SYS.REQ.ACCOUNT." + account + ".CLAIMS.LOOKUP"
}

// ServerKick returns the subject that has the server whose id is server close one of its
// connections ({"cid": N}).
func ServerKick(server string) string { return "$SYS.REQ.SERVER." + server + ".KICK" }

// ServerKickAny is the grant row for ServerKick on every server.
const ServerKickAny = "$SYS.REQ.SERVER.*.KICK"

// AccountConnz returns the subject that lists account's connections.
func AccountConnz(account string) string { return "$SYS.REQ.ACCOUNT." + account + ".CONNZ" }

// AccountConnect returns the subject of the system account's event for each connection of
// account that opens.
func AccountConnect(account string) string { return "$SYS.ACCOUNT." + account + ".CONNECT" }

// AccountDisconnect returns the subject of the system account's event for each connection of
// account that closes.
func AccountDisconnect(account string) string { return "$SYS.ACCOUNT." + account + ".DISCONNECT" }

// The status header of a reply the server writes itself, and its value when nothing subscribes
// to the request's subject (a no-payload reply).
const (
	StatusHeader = "Status"
	NoResponders = "503"
)

// Headers of a KV bucket's messages, as the server and nats.go write them: a delete or purge
// marker carries KVOperation set to KVDelete or KVPurge, a marker the server writes when a row's
// time to live ran out carries MarkerReason, and a row written with its own time to live carries
// MsgTTL.
const (
	KVOperation  = "KV-Operation"
	KVDelete     = "DEL"
	KVPurge      = "PURGE"
	MarkerReason = "Nats-Marker-Reason"
	MsgTTL       = "Nats-TTL"
)

// Rollup is the header that has the server purge, as it stores a message, the other messages of
// its subject (RollupSubject, as a KV purge does) or of its whole stream (RollupAll).
const (
	Rollup        = "Nats-Rollup"
	RollupSubject = "sub"
	RollupAll     = "all"
)
