package meshwire

import (
	"encoding/json"

	"github.com/gocotal/cotal/wire"
)

// fingerprintTarget is the target member of a fingerprint: the body target as carried.
type fingerprintTarget struct {
	Owner           string `json:"owner"`
	Actor           string `json:"actor"`
	LifecycleUID    string `json:"lifecycleUid"`
	MappingRevision uint64 `json:"mappingRevision,omitempty"`
}

type fingerprintCaller struct {
	ID           string `json:"id"`
	LifecycleUID string `json:"lifecycleUid"`
}

// fingerprintObject is the object SPEC §13.4 digests, absent members omitted, never null.
type fingerprintObject struct {
	Endpoint     string             `json:"endpoint"`
	Command      string             `json:"command"`
	Class        wire.RequestClass  `json:"class,omitempty"`
	Authz        wire.AuthzMode     `json:"authz,omitempty"`
	Target       *fingerprintTarget `json:"target,omitempty"`
	InputDigest  string             `json:"inputDigest,omitempty"`
	OutputDigest string             `json:"outputDigest,omitempty"`
	Args         json.RawMessage    `json:"args,omitempty"`
	AuthDigest   string             `json:"authDigest,omitempty"`
	Caller       fingerprintCaller  `json:"caller"`
	GoalID       string             `json:"goalId,omitempty"`
	ID           string             `json:"id"`
}

// Fingerprint returns the semantic fingerprint of a request (SPEC §13.4): the sha256:<hex>
// digest of the RFC 8785 form of {endpoint, command, class, authz?, target?, inputDigest,
// outputDigest, args, authDigest?, caller: {id, lifecycleUid}, goalId?, id}, where the caller and
// the mode come from the request subject (route) and everything else from the envelope. Absent
// members are omitted, so two implementations digest the same bytes.
func Fingerprint(route wire.EndpointRoute, req *wire.EndpointRequest) (string, error) {
	obj := fingerprintObject{
		Endpoint: req.Op.Endpoint, Command: req.Op.Command, Class: req.Class, Authz: route.Mode,
		InputDigest: req.Op.InputDigest, OutputDigest: req.Op.OutputDigest, Args: req.Args,
		GoalID: req.GoalID, ID: req.ID,
		Caller: fingerprintCaller{ID: route.Caller.Principal.String(), LifecycleUID: string(route.Caller.UID)},
	}
	if req.Auth != nil {
		// authDigest is over the auth slot's UTF-8 bytes exactly as carried, never re-canonicalized;
		// absent auth leaves it out.
		obj.AuthDigest = wire.ContentDigest([]byte(*req.Auth))
	}
	if t := req.Target; t != nil {
		obj.Target = &fingerprintTarget{Owner: t.Owner, Actor: t.Actor, LifecycleUID: t.LifecycleUID, MappingRevision: t.MappingRevision}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	return wire.Digest(raw)
}
