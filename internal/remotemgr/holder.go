package remotemgr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/sessiongrant"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// A person who supervises a remote manager may attach to the agents it runs from their own
// machine (cotal-go's addition; SPEC §13.6 leaves a remote party's redemption to the
// implementation). The manager redeems such a session in the host's ledger for the person's
// lifecycle, as it does for the host's operator, and the caller half waits there. The person,
// who cannot read that ledger, takes it on HolderPath with their IdP token, and ends the session
// there as its holder: both halves are then refused by the broker, as for any session.

// HolderPath is the exchange route a session's holder takes its half on, or ends the session.
const HolderPath = "/manager-session-holder"

// HolderRequest is a holder's request on HolderPath (closed: an unknown field is bad-request).
// Without End it asks for the caller half of session SessionID; with End it ends the session.
type HolderRequest struct {
	V         int    `json:"v"`
	IDPToken  string `json:"idpToken"`
	Space     string `json:"space"`
	Actor     string `json:"actor"`
	SessionID string `json:"sessionId"`
	End       bool   `json:"end,omitempty"`
	// Grant is the session's grant as the manager answered it, presented to take the caller
	// half: the host verifies it before it releases anything.
	Grant json.RawMessage `json:"grant,omitempty"`
}

// HolderResponse answers a HolderRequest: the caller half's user JWT and seed (Creds, the
// decorated form, its expiry in the JWT), or Ended.
type HolderResponse struct {
	SessionID string `json:"sessionId"`
	Creds     string `json:"creds,omitempty"`
	Ended     bool   `json:"ended,omitempty"`
}

// parseHolderRequest decodes and validates a holder's body; anything malformed is bad-request.
func parseHolderRequest(body []byte) (*HolderRequest, error) {
	var r HolderRequest
	if err := decodeClosed(body, &r); err != nil {
		return nil, err
	}
	switch {
	case r.V != protocolVersion:
		return nil, refuse(wire.CodeBadRequest, "v must be %d", protocolVersion)
	case r.IDPToken == "":
		return nil, refuse(wire.CodeBadRequest, "idpToken is required")
	}
	if _, err := wire.ParseSpace(r.Space); err != nil {
		return nil, refuse(wire.CodeBadRequest, "%v", err)
	}
	if err := wire.ValidateActor(r.Actor); err != nil {
		return nil, refuse(wire.CodeBadRequest, "%v", err)
	}
	if err := meshwire.ValidateSessionID(r.SessionID); err != nil {
		return nil, refuse(wire.CodeBadRequest, "%v", err)
	}
	return &r, nil
}

// HandleHolder answers one holder's request body: the status and the reply to send. A refusal is
// logged with its reason and answered with its catalog code alone.
func (h *Host) HandleHolder(ctx context.Context, body []byte) (int, any) {
	resp, err := h.holder(ctx, body)
	return h.answer("session holder request refused", resp, err)
}

func (h *Host) holder(ctx context.Context, body []byte) (*HolderResponse, error) {
	r, err := parseHolderRequest(body)
	if err != nil {
		return nil, err
	}
	if wire.Space(r.Space) != h.Space {
		return nil, refuse(wire.CodePermissionDenied, "the request is for space %s, this host serves %s", r.Space, h.Space)
	}
	who, err := h.supervisor(ctx, r.IDPToken, r.Actor)
	if err != nil {
		return nil, err
	}
	me, err := h.heldBy(ctx, who, r)
	if err != nil {
		return nil, err
	}
	if r.End {
		err := h.Ledger.CloseSession(ctx, r.SessionID, authstore.SessionCloser{Holder: &me}, authstore.SessionClosed)
		if err != nil {
			return nil, refuse(wire.CodeUnavailable, "end session %s: %v", r.SessionID, err)
		}
		return &HolderResponse{SessionID: r.SessionID, Ended: true}, nil
	}
	if r.Grant == nil {
		return nil, refuse(wire.CodeBadRequest, "grant is required to take a session's half")
	}
	// The half goes out for the session the grant names, once it verifies: it must be the one
	// checked above as the person's.
	g, err := h.Ledger.VerifyGrant(ctx, r.Grant)
	if e, refused := errors.AsType[*wire.EndpointError](err); refused {
		return nil, refuse(e.Code, "take session %s's half: %v", r.SessionID, err)
	}
	if err != nil {
		return nil, refuse(wire.CodeUnavailable, "verify the grant of session %s: %v", r.SessionID, err)
	}
	if g.SessionID != r.SessionID {
		return nil, refuse(wire.CodeBadRequest, "the grant is session %s's, not %s's", g.SessionID, r.SessionID)
	}
	half, err := h.Ledger.SessionCaller(ctx, r.Grant, me)
	e, refused := errors.AsType[*wire.EndpointError](err)
	switch {
	case refused: // the grant did not verify
		return nil, refuse(e.Code, "take session %s's half: %v", r.SessionID, err)
	case errors.Is(err, authstore.ErrConflict):
		return nil, refuse(wire.CodeFailedPrecondition, "release session %s: %v", r.SessionID, err)
	case err != nil:
		return nil, refuse(wire.CodeUnavailable, "release session %s: %v", r.SessionID, err)
	}
	// supervise may have gone, or the row been granted anew, while the half was read: the
	// person's revocation evicts their managers with their sessions, and one that ran before the
	// read must not be outlived by a half going out, so the session ends instead. A check that
	// could not answer releases nothing and ends nothing.
	again, err := h.supervisor(ctx, r.IDPToken, r.Actor)
	holds := false
	if err == nil {
		holds, err = h.personHolder(ctx, again, me)
	}
	if err != nil || !holds {
		if err == nil {
			err = refuse(wire.CodePermissionDenied, "%s no longer holds session %s at its current incarnation", me.Principal, r.SessionID)
		}
		if ref, ok := errors.AsType[*Refusal](err); ok && ref.Code == wire.CodePermissionDenied {
			cerr := h.Ledger.CloseSession(context.WithoutCancel(ctx), r.SessionID, authstore.SessionCloser{Holder: &me}, authstore.SessionClosed)
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return &HolderResponse{SessionID: r.SessionID, Creds: string(half.Creds)}, nil
}

// heldBy checks that session r names is one the person holds: its row names the person's actor
// at the incarnation their ledger row has now, and it is served by a remote manager of the
// person's (registered by any of their actors). It returns the holder's lifecycle. A session of anyone else is not-found, so a
// person probing ids learns nothing of others' sessions.
func (h *Host) heldBy(ctx context.Context, who *Person, r *HolderRequest) (wire.Lifecycle, error) {
	sess, err := h.Ledger.Session(ctx, r.SessionID)
	if err != nil {
		return wire.Lifecycle{}, refuse(wire.CodeUnavailable, "read session %s: %v", r.SessionID, err)
	}
	if sess == nil {
		return wire.Lifecycle{}, refuse(wire.CodeNotFound, "no session %s", r.SessionID)
	}
	me := wire.Lifecycle{Principal: principal(who.Owner, r.Actor), UID: sess.Row.Holder.LifecycleUID}
	notHeld := refuse(wire.CodeNotFound, "session %s is held by %s.%s, not by %s at its current incarnation",
		r.SessionID, sess.Row.Holder.Principal, sess.Row.Holder.LifecycleUID, me.Principal)
	if sess.Row.Holder.Principal != me.Principal.String() {
		return wire.Lifecycle{}, notHeld
	}
	switch holds, err := h.personHolder(ctx, who, me); {
	case err != nil:
		return wire.Lifecycle{}, err
	case !holds:
		return wire.Lifecycle{}, notHeld
	}
	reg, err := h.Registry.Get(ctx, string(sess.Row.Serving.InstanceID))
	switch {
	case err != nil:
		return wire.Lifecycle{}, refuse(wire.CodeUnavailable, "read the registration of %s: %v", sess.Row.Serving.InstanceID, err)
	case reg == nil || reg.Owner != who.Owner:
		return wire.Lifecycle{}, refuse(wire.CodeNotFound, "session %s is not served by a remote manager of %s", r.SessionID, who.Owner)
	}
	return me, nil
}

// personHolder reports whether caller may hold a session of a remote manager its person
// supervises: the person's own interactive row, at its current incarnation, holding supervise.
// Their half waits in the host's ledger, and they take it on HolderPath.
func (h *Host) personHolder(ctx context.Context, who *Person, caller wire.Lifecycle) (bool, error) {
	row, err := h.ownRow(ctx, who, caller)
	return row != nil && row.Kind == userauth.KindInteractive && row.Has(userauth.ScopeSupervise), err
}

// HolderClient is a person's side of HolderPath.
type HolderClient struct {
	// URL is the route's address: the exchange's URL and HolderPath, or several comma-separated
	// (every authority node's of a cluster), tried in turn.
	URL   string
	Space wire.Space
	// Actor is the person's actor, the session's holder.
	Actor string
	// IDToken returns a fresh IdP token of the person.
	IDToken func(ctx context.Context) (string, error)
	HTTP    *http.Client
}

// Caller takes the caller half of the session of grant, which the person holds, as a credential
// of holder's.
func (c *HolderClient) Caller(ctx context.Context, grant *sessiongrant.Grant, holder wire.Lifecycle) (*authority.Credential, error) {
	sessionID := grant.SessionID
	resp, err := c.do(ctx, sessionID, grant.Raw)
	if err != nil {
		return nil, err
	}
	if resp.Creds == "" {
		return nil, fmt.Errorf("session %s: the host answered no caller half", sessionID)
	}
	token, err := jwt.ParseDecoratedJWT([]byte(resp.Creds))
	if err != nil {
		return nil, fmt.Errorf("session %s: the caller half: %w", sessionID, err)
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return nil, fmt.Errorf("session %s: the caller half: %w", sessionID, err)
	}
	return &authority.Credential{Profile: authority.ProfileSessionCaller, Principal: holder.Principal, LifecycleUID: holder.UID,
		PublicKey: claims.Subject, JWT: token, Expires: time.Unix(claims.Expires, 0), Creds: []byte(resp.Creds)}, nil
}

// End ends a session the person holds: the broker refuses both halves from then on.
func (c *HolderClient) End(ctx context.Context, sessionID string) error {
	_, err := c.do(ctx, sessionID, nil)
	return err
}

// do asks the host for the half of the session of grant, or without a grant ends the session.
func (c *HolderClient) do(ctx context.Context, sessionID string, grant json.RawMessage) (*HolderResponse, error) {
	end := grant == nil
	tok, err := c.IDToken(ctx)
	if err != nil {
		return nil, fmt.Errorf("session %s: the person's IdP token: %w", sessionID, err)
	}
	body, _ := json.Marshal(HolderRequest{V: protocolVersion, IDPToken: tok, Space: string(c.Space), Actor: c.Actor, SessionID: sessionID, End: end, Grant: grant}) // always encodes
	raw, err := postAny(ctx, c.HTTP, failover.New(failover.Split(c.URL)...), body, "session "+sessionID)
	if err != nil {
		return nil, err
	}
	var resp HolderResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("session %s: decode the answer: %w", sessionID, err)
	}
	if resp.SessionID != sessionID || resp.Ended != end {
		return nil, fmt.Errorf("session %s: the answer is for another request", sessionID)
	}
	return &resp, nil
}

// post sends body to url and returns the answer's body; a refusal is a *Refusal with the code the
// host answered, what names the request in errors.
func post(ctx context.Context, hc *http.Client, url string, body []byte, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: read the answer: %w", what, err)
	}
	if res.StatusCode != http.StatusOK {
		var refusal struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &refusal) != nil || refusal.Error == "" {
			refusal.Error = string(wire.CodeUnavailable)
		}
		return nil, &Refusal{Code: wire.ErrorCode(refusal.Error), Reason: fmt.Sprintf("the host refused %s (HTTP %d)", what, res.StatusCode)}
	}
	return raw, nil
}

// postAny posts body to the first of routes that answers for the host: a host that could not
// decide (its store did not answer) is passed over for the next, as one that is down is.
func postAny(ctx context.Context, hc *http.Client, routes *failover.Endpoints, body []byte, what string) (raw []byte, err error) {
	err = routes.Do(ctx, func(ctx context.Context, u string) (err error) {
		raw, err = post(ctx, hc, u, body, what)
		if ref, ok := errors.AsType[*Refusal](err); ok && ref.Code == wire.CodeUnavailable {
			return fmt.Errorf("%w (%w)", err, failover.ErrUnanswered)
		}
		return err
	})
	return raw, err
}

// HolderURL returns the address of HolderPath on the exchange at exchangeURL.
func HolderURL(exchangeURL string) string { return strings.TrimSuffix(exchangeURL, "/") + HolderPath }
