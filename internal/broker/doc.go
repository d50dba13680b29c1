// Package broker runs NATS for a mesh: it renders nats-server configuration (authenticated
// operator mode with the MEMORY resolver, or open loopback mode) and starts an embedded server
// from that file. The version floor a client checks is wire.CheckServerVersion.
//
// The rendered file is the single description of the broker: the embedded server loads it with
// the same parser a stock `nats-server -c` uses, so a mesh can move to an external server or a
// cluster without a second configuration path. Keys and JWTs come from package authority; broker
// only checks that every account it is asked to trust was signed by the operator it trusts.
package broker
