// Package sessiongrant is an attach session's grant (SPEC §13.6, §13.10): the one-use, signed
// artifact that names a session, its two rails, the lifecycle that holds it and the serving
// incarnation, in the reference's closed shape.
//
// A grant is signed by an anchor of role sessions whose scope covers its endpoint. Verify checks
// it as the reference does: a closed schema at every level, the audience space, the rails
// derived again from the session and the serving epoch, the anchor resolved afresh, the
// signature over the grant exactly as presented, then its currency.
package sessiongrant

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gocotal/cotal/internal/anchor"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Bounds.
const (
	// MaxTTL is the longest a grant lives.
	MaxTTL = 24 * time.Hour
	// MaxBytes bounds a grant's canonical form.
	MaxBytes = 16 << 10
	// Version is the grant's v.
	Version = 1
)

// Grant is a session grant. Its members are in the order the reference writes them.
type Grant struct {
	V         int      `json:"v"`
	SessionID string   `json:"sessionId"`
	Space     string   `json:"space"`
	Endpoint  string   `json:"endpoint"`
	Subjects  Subjects `json:"subjects"`
	Holder    Holder   `json:"holder"`
	Serving   Serving  `json:"serving"`
	// Window is the most data frames each rail's sender may have unacknowledged.
	Window int `json:"window"`
	// Iat, Nbf and Exp are when it was issued, opens and ends, in epoch milliseconds.
	Iat wire.EpochMillis  `json:"iat"`
	Nbf *wire.EpochMillis `json:"nbf,omitempty"`
	Exp wire.EpochMillis  `json:"exp"`
	// Nonce tells apart grants issued for the same parties.
	Nonce  string `json:"nonce"`
	Issuer Issuer `json:"issuer"`
	Sig    string `json:"sig,omitempty"`

	// Raw is the grant exactly as it arrived, which a holder presents again.
	Raw json.RawMessage `json:"-"`
}

// Subjects are a session's two rails.
type Subjects struct {
	In  string `json:"in"`
	Out string `json:"out"`
}

// Holder is the lifecycle a grant is bound to, at its process epoch.
type Holder struct {
	ID           string            `json:"id"`
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
	ProcessEpoch int64             `json:"processEpoch"`
}

// Serving is the serving incarnation a grant is bound to.
type Serving struct {
	InstanceID wire.LifecycleUID `json:"instanceId"`
	Epoch      int64             `json:"epoch"`
}

// Issuer names the anchor that signed the grant.
type Issuer struct {
	KeyID string `json:"keyId"`
}

// Rails returns the session's in and out rails, derived from its members.
func Rails(sp wire.Space, endpoint, sessionID string, epoch int64) (Subjects, error) {
	in, err := meshwire.SessionRail(sp, endpoint, sessionID, epoch, meshwire.SessionIn)
	if err != nil {
		return Subjects{}, err
	}
	out, err := meshwire.SessionRail(sp, endpoint, sessionID, epoch, meshwire.SessionOut)
	return Subjects{In: in, Out: out}, err
}

// Sign signs g with s, setting its issuer and sig, and keeps its bytes in Raw.
func (g *Grant) Sign(s *anchor.Signer) error {
	g.Issuer, g.Sig = Issuer{KeyID: s.Anchor.KeyID}, ""
	unsigned, err := json.Marshal(g)
	if err != nil {
		return err
	}
	input, err := anchor.SignatureInput(unsigned)
	if err != nil {
		return err
	}
	if g.Sig, err = s.Sign(input); err != nil {
		return err
	}
	g.Raw, err = json.Marshal(g)
	return err
}

// Parse decodes a grant for its members, keeping its bytes; it checks nothing Verify checks.
func Parse(raw []byte) (*Grant, error) {
	var g Grant
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("the session grant does not decode: %w", err)
	}
	g.Raw = append(json.RawMessage(nil), raw...)
	return &g, nil
}

// refuse is a verification's refusal.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	return wire.NewEndpointError(code, wire.OutcomeNotExecuted, "session grant: "+format, args...)
}

// members is a JSON object's members by exact name.
type members map[string]json.RawMessage

// object decodes raw as one JSON object with members among allowed.
func object(raw json.RawMessage, what string, allowed ...string) (members, error) {
	o, err := meshwire.DecodeClosed(raw, what, allowed...)
	if err != nil {
		return nil, refuse(wire.CodeContractInvalid, "%s: %v", what, err)
	}
	return o, nil
}

// str reads member k as a string.
func (o members) str(k string) (string, error) {
	var s string
	if o[k] == nil || json.Unmarshal(o[k], &s) != nil {
		return "", refuse(wire.CodeContractInvalid, "%s is not a string", k)
	}
	return s, nil
}

// integer reads member k as a safe integer from least.
func (o members) integer(k string, least int64) (int64, error) {
	n, err := meshwire.SafeInteger(o[k], k, least)
	if err != nil {
		return 0, refuse(wire.CodeContractInvalid, "%v", err)
	}
	return n, nil
}

// Verify checks the grant raw presented for space sp at now, resolving its signing key through
// resolve, and returns it: any refusal is a *wire.EndpointError with the code the reference
// answers (contract-invalid for its shape, permission-denied for its identity and signature,
// expired and failed-precondition for its currency).
func Verify(raw []byte, sp wire.Space, resolve anchor.Resolver, now time.Time) (*Grant, error) {
	input, err := anchor.SignatureInput(raw)
	if err != nil {
		return nil, refuse(wire.CodeContractInvalid, "it does not canonicalize: %v", err)
	}
	if len(input) > MaxBytes {
		return nil, refuse(wire.CodeContractInvalid, "it is over %d bytes", MaxBytes)
	}
	o, err := object(raw, "the grant", "v", "sessionId", "space", "endpoint", "subjects", "holder", "serving", "window", "iat", "nbf", "exp", "nonce", "issuer", "sig")
	if err != nil {
		return nil, err
	}
	g := &Grant{Raw: append(json.RawMessage(nil), raw...)}
	if v, err := o.integer("v", 0); err != nil || v != Version {
		return nil, refuse(wire.CodeContractInvalid, "unknown version %s", o["v"])
	}
	g.V = Version
	if g.Space, err = o.str("space"); err != nil {
		return nil, err
	}
	if g.Space != string(sp) {
		return nil, refuse(wire.CodePermissionDenied, "it is for space %q, not %q", g.Space, sp)
	}
	if g.SessionID, err = o.str("sessionId"); err != nil {
		return nil, err
	}
	if err := meshwire.ValidateSessionID(g.SessionID); err != nil {
		return nil, refuse(wire.CodeContractInvalid, "%v", err)
	}
	if g.Endpoint, err = o.str("endpoint"); err != nil {
		return nil, err
	}
	if _, err := wire.ParseEndpointToken(g.Endpoint); err != nil {
		return nil, refuse(wire.CodeContractInvalid, "%v", err)
	}
	if err := g.parseParties(o); err != nil {
		return nil, err
	}
	subj, err := object(o["subjects"], "subjects", "in", "out")
	if err != nil {
		return nil, err
	}
	if g.Subjects.In, err = subj.str("in"); err != nil {
		return nil, err
	}
	if g.Subjects.Out, err = subj.str("out"); err != nil {
		return nil, err
	}
	want, err := Rails(sp, g.Endpoint, g.SessionID, g.Serving.Epoch)
	if err != nil {
		return nil, refuse(wire.CodeContractInvalid, "%v", err)
	}
	if g.Subjects != want {
		return nil, refuse(wire.CodePermissionDenied, "its subjects are not the session's rails")
	}
	w, err := o.integer("window", 1)
	if err != nil || w > meshwire.SessionWindowMax {
		return nil, refuse(wire.CodeContractInvalid, "window %s is not 1 to %d", o["window"], meshwire.SessionWindowMax)
	}
	g.Window = int(w)
	if err := g.parseTimes(o); err != nil {
		return nil, err
	}
	if g.Nonce, err = o.str("nonce"); err != nil {
		return nil, err
	}
	if len(g.Nonce) < 8 || len(g.Nonce) > 64 || wire.ValidateIDToken("nonce", g.Nonce) != nil {
		return nil, refuse(wire.CodeContractInvalid, "nonce is not 8 to 64 characters of base64url")
	}
	iss, err := object(o["issuer"], "issuer", "keyId")
	if err != nil {
		return nil, err
	}
	if g.Issuer.KeyID, err = iss.str("keyId"); err != nil {
		return nil, err
	}
	if o["sig"] != nil {
		if g.Sig, err = o.str("sig"); err != nil {
			return nil, refuse(wire.CodePermissionDenied, "sig is not a string")
		}
	}

	a, err := anchor.Use(resolve, g.Issuer.KeyID, anchor.RoleSessions, g.Iat)
	if err != nil {
		return nil, err
	}
	if err := a.Covers(anchor.RoleSessions, g.Endpoint); err != nil {
		return nil, err
	}
	if err := a.Verify(input, g.Sig); err != nil {
		return nil, err
	}
	// Currency last: a forged grant is refused for its identity, never as merely stale.
	if err := anchor.Currency("the session grant", g.Iat, g.Nbf, g.Exp, now, MaxTTL); err != nil {
		return nil, err
	}
	return g, nil
}

// parseParties reads the holder and the serving incarnation.
func (g *Grant) parseParties(o members) error {
	sv, err := object(o["serving"], "serving", "instanceId", "epoch")
	if err != nil {
		return err
	}
	inst, err := sv.str("instanceId")
	if err != nil {
		return err
	}
	if g.Serving.InstanceID, err = wire.ParseLifecycleUID(inst); err != nil {
		return refuse(wire.CodeContractInvalid, "serving.instanceId: %v", err)
	}
	if g.Serving.Epoch, err = sv.integer("epoch", 0); err != nil {
		return err
	}
	h, err := object(o["holder"], "holder", "id", "lifecycleUid", "processEpoch")
	if err != nil {
		return err
	}
	if g.Holder.ID, err = h.str("id"); err != nil {
		return err
	}
	if _, err := wire.ParsePrincipal(g.Holder.ID); err != nil {
		return refuse(wire.CodeContractInvalid, "holder.id: %v", err)
	}
	uid, err := h.str("lifecycleUid")
	if err != nil {
		return err
	}
	if g.Holder.LifecycleUID, err = wire.ParseLifecycleUID(uid); err != nil {
		return refuse(wire.CodeContractInvalid, "holder.lifecycleUid: %v", err)
	}
	g.Holder.ProcessEpoch, err = h.integer("processEpoch", 0)
	return err
}

// parseTimes reads iat, nbf and exp.
func (g *Grant) parseTimes(o members) error {
	iat, err := o.integer("iat", 0)
	if err != nil {
		return err
	}
	g.Iat = wire.EpochMillis(iat)
	if o["nbf"] != nil {
		nbf, err := o.integer("nbf", 0)
		if err != nil {
			return err
		}
		n := wire.EpochMillis(nbf)
		g.Nbf = &n
	}
	exp, err := o.integer("exp", 0)
	g.Exp = wire.EpochMillis(exp)
	return err
}
