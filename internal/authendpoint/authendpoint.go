// Package authendpoint serves the auth endpoint (SPEC §13.6, the auth retire rail): the space's
// auth service answering retire-lifecycle, which a remote manager's retirement requester calls, in
// exact mode, to retire one lifecycle it spawned. The contract declares the reference's
// ai.cotal.auth cluster (its command, modes, capability and schemas), so the digests match the
// reference's as long as the schemas do; what a retirement may retire is decided by the auth
// service (Config.Retire), not here.
package authendpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// The cluster's URN and revision, as the reference publishes them.
const (
	ClusterURN      = "ai.cotal.auth"
	ClusterRevision = 1
)

// capAdmin is the capability retire-lifecycle requires.
const capAdmin = "auth.admin"

// The schemas, byte for byte the reference's: their canonical forms fix the digests.
const (
	retireInput  = `{"type":"object","additionalProperties":false,"required":["opId","serveEndpoint","serveInstanceId","serveEpoch"],"properties":{"opId":{"type":"string"},"serveEndpoint":{"type":"string"},"serveInstanceId":{"type":"string"},"serveEpoch":{"type":"integer","minimum":0}}}`
	retireOutput = `{"type":"object","additionalProperties":false,"required":["retired","lifecycleUid","opId","evictedPrincipals"],"properties":{"retired":{"type":"boolean"},"lifecycleUid":{"type":"string"},"opId":{"type":"string"},"evictedPrincipals":{"type":"array","items":{"type":"string"}}}}`
)

// Contract returns the auth endpoint's cluster, built once.
var Contract = sync.OnceValues(func() (*contract.Cluster, error) {
	return contract.NewCluster(ClusterURN, ClusterRevision, contract.Declaration{
		Command: contract.Command{Name: meshwire.CommandRetireLifecycle, Class: wire.ClassEphemeral, Targeted: true,
			Modes: []wire.AuthzMode{wire.ModeExact}, Capability: capAdmin},
		Input: json.RawMessage(retireInput), Output: json.RawMessage(retireOutput),
	})
})

// Commands returns the commands the auth endpoint serves: the rows its serving credential holds.
func Commands() []string { return []string{meshwire.CommandRetireLifecycle} }

// RetireArgs are retire-lifecycle's args: the requester's stable operation id, and the serve gate
// the requester serves under (its endpoint, instance and the process epoch it declares).
type RetireArgs struct {
	OpID            string            `json:"opId"`
	ServeEndpoint   string            `json:"serveEndpoint"`
	ServeInstanceID wire.LifecycleUID `json:"serveInstanceId"`
	ServeEpoch      int64             `json:"serveEpoch"`
}

// Retired is retire-lifecycle's answer.
type Retired struct {
	Retired           bool              `json:"retired"`
	LifecycleUID      wire.LifecycleUID `json:"lifecycleUid"`
	OpID              string            `json:"opId"`
	EvictedPrincipals []string          `json:"evictedPrincipals"`
}

// Retire decides and carries out one retirement: caller is the broker-authenticated requester
// (the subject's triple), target the lifecycle the exact-mode subject names. A refusal is a
// *wire.EndpointError; any other error is internal.
type Retire func(ctx context.Context, caller, target wire.Lifecycle, args RetireArgs) (*Retired, error)

// Config is what the auth endpoint is served on.
type Config struct {
	// Conn is the connection of the instance's serving credential.
	Conn *nats.Conn
	// Space is the space served.
	Space wire.Space
	// Instance and Epoch are the serving incarnation: its instance id and the epoch its gate
	// opened at, which its replies and its registration carry.
	Instance wire.LifecycleUID
	Epoch    int64
	// Retire decides and carries out each retirement.
	Retire Retire
	// Log receives the endpoint's own refusals and faults. Default: discard.
	Log *slog.Logger
}

// Service is the served auth endpoint.
type Service struct {
	srv *endpoint.Server
	reg *endpoint.Registration
	// epoch is the one the registration reports.
	epoch int64
}

// Serve publishes the contract, serves retire-lifecycle on cfg.Conn and registers the instance in
// the service registry (svc.auth.<instanceId>).
func Serve(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Retire == nil {
		return nil, errors.New("authendpoint: no Retire")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cluster, err := Contract()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, err
	}
	records, err := js.KeyValue(ctx, string(meshwire.RecordsBucket(cfg.Space)))
	if err != nil {
		return nil, fmt.Errorf("open the records bucket: %w", err)
	}
	if err := contract.Publish(ctx, js, cfg.Space, cluster.Artifacts); errors.Is(err, contract.ErrCorrupt) {
		// A capture holds a digest subject: describe carries the documents all the same.
		cfg.Log.Warn("the contract store holds a foreign message at a digest subject of the auth contract", "err", err)
	} else if err != nil {
		return nil, fmt.Errorf("publish the auth contract: %w", err)
	}
	c := cluster.Document.Commands[0]
	sch := cluster.Schemas[c.Name]
	doc, _ := json.Marshal(cluster.Document) // always encodes
	srv, err := endpoint.Serve(cfg.Conn, endpoint.Config{
		Space: cfg.Space, Endpoint: meshwire.AuthEndpoint, Owner: wire.DevOwner, Instance: cfg.Instance, Epoch: cfg.Epoch, Log: cfg.Log,
		Commands: []endpoint.Command{{Name: c.Name, Class: c.Class, Modes: c.Modes, InputDigest: c.InputDigest, OutputDigest: c.OutputDigest,
			Input: sch.Input, Output: sch.Output, Handle: retireHandler(cfg.Retire)}},
		Clusters: []endpoint.Cluster{{Digest: cluster.Closure.Digest, Commands: []string{c.Name}, Document: doc}},
	})
	if err != nil {
		return nil, err
	}
	reg, err := endpoint.Register(ctx, records, cfg.Instance, cfg.Epoch, endpoint.ServiceSpec{
		Endpoint: string(meshwire.AuthEndpoint), Owner: wire.DevOwner, ClusterDigests: []string{cluster.Closure.Digest}, Protocol: endpoint.Protocol{V: 1},
	}, cfg.Log)
	if err != nil {
		return nil, errors.Join(err, srv.Stop(ctx))
	}
	return &Service{srv: srv, reg: reg, epoch: cfg.Epoch}, nil
}

// Stop deregisters the instance and stops serving.
func (s *Service) Stop(ctx context.Context) error {
	return errors.Join(s.reg.Deregister(ctx, s.epoch), s.srv.Stop(ctx))
}

// retireHandler reads the exact-mode target from the subject and the args, strictly, and hands
// them to retire.
func retireHandler(retire Retire) endpoint.Handler {
	return func(ctx context.Context, req *endpoint.Request) (any, error) {
		var args RetireArgs
		dec := json.NewDecoder(bytes.NewReader(req.Args()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil {
			return nil, wire.NewEndpointError(wire.CodeBadRequest, wire.OutcomeNotExecuted, "args: %v", err)
		}
		if req.Route.Mode != wire.ModeExact {
			return nil, wire.NewEndpointError(wire.CodeBadRequest, wire.OutcomeNotExecuted, "retire-lifecycle is exact-mode only")
		}
		t := req.Route.Target
		p, err := wire.NewPrincipal(t.Owner, t.Actor)
		if err != nil {
			return nil, wire.NewEndpointError(wire.CodeBadRequest, wire.OutcomeNotExecuted, "target: %v", err)
		}
		return retire(ctx, req.Caller(), wire.Lifecycle{Principal: p, UID: t.UID}, args)
	}
}
