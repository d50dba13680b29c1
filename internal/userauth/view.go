package userauth

import "fmt"

// View is a server-authored elevated profile a bearer may carry (SPEC §10): chosen only by the
// exchange, re-authorized against the ledger at every connect, and minted by the callout in place
// of the agent profile. The set is closed: an unknown view is refused, never mapped to a profile.
//
// The reference's session-caller and transfer-writer views are not in the set: each needs a claim
// (act.session, act.transferWriter) this package does not mint, so both are refused.
type View string

// The views.
const (
	// ViewAdmin is the operator's read-everything view. Needs the admin scope; loopback only.
	ViewAdmin View = "admin"
	// ViewPurger purges space history. Needs admin; loopback only.
	ViewPurger View = "purger"
	// ViewDeployer runs a manifest deploy of the caller's own team (the deployer profile: the
	// live state a deploy plans against, and the manager's untargeted spawn family). Needs
	// spawn; loopback only.
	ViewDeployer View = "deployer"
	// ViewManagerService is the reference's remote-manager authority view (SPEC §13.1). It is
	// never issued here: a remote manager asks the host for its authority over the exchange's
	// /manager-service-authority route, with the person's IdP token and supervise checked there,
	// so the exchange refuses the view by name rather than issue a bearer nothing accepts.
	ViewManagerService View = "manager-service"
	// ViewChannelWriter edits the channel registry. Needs admin; served on the public face.
	ViewChannelWriter View = "channel-writer"
	// ViewChannelPurger deletes channels. Needs admin; served on the public face.
	ViewChannelPurger View = "channel-purger"
	// ViewManagerCaller narrows a bearer to one manager instance (act.managerInstanceId). It adds
	// no capability, needs no scope, is served on both faces and is the only view a managed
	// agent's exchange may ask for.
	ViewManagerCaller View = "manager-caller"
)

// ParseView returns s as a View, or an error when s is not one of the closed set. The empty
// string is the agent profile and returns "" without error.
func ParseView(s string) (View, error) {
	switch v := View(s); v {
	case "", ViewAdmin, ViewPurger, ViewDeployer, ViewManagerService, ViewChannelWriter, ViewChannelPurger, ViewManagerCaller:
		return v, nil
	}
	return "", fmt.Errorf("unknown view %q", s)
}

// RequiredScope returns the ledger scope a row must hold for a bearer of v, or "" when v needs
// none (manager-caller, and the agent profile).
func (v View) RequiredScope() string {
	switch v {
	case ViewAdmin, ViewPurger, ViewChannelWriter, ViewChannelPurger:
		return ScopeAdmin
	case ViewDeployer:
		return ScopeSpawn
	case ViewManagerService: // never issued; a bearer claiming it still needs supervise
		return ScopeSupervise
	}
	return ""
}

// Public reports whether the public exchange face may issue v (SPEC §10: channel-writer,
// channel-purger and manager-caller; the rest stay loopback-only). The agent profile "" is public.
func (v View) Public() bool {
	switch v {
	case "", ViewChannelWriter, ViewChannelPurger, ViewManagerCaller:
		return true
	}
	return false
}

// AgentAllowed reports whether a managed agent's secret exchange may carry v: none, or
// manager-caller.
func (v View) AgentAllowed() bool { return v == "" || v == ViewManagerCaller }

// allowedFor reports whether a row of the given kind and scopes may hold a bearer of view v.
func (v View) allowedFor(kind Kind, r *Row) bool {
	if _, err := ParseView(string(v)); err != nil {
		return false
	}
	if kind == KindManaged && !v.AgentAllowed() {
		return false
	}
	if s := v.RequiredScope(); s != "" && !r.Has(s) {
		return false
	}
	return true
}
