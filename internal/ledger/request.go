package ledger

import (
	"fmt"
	"slices"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// Request asks for a credential of a profile for the principal local.<Name> in Space: the
// credential as the CLI and the mesh name it, before it is built into an authority.Grant.
type Request struct {
	Space   wire.Space
	Profile authority.Profile
	// Owner is the principal's owner: wire.DevOwner (static credentials) when empty, or a
	// person's derived owner token (u_…) in user-auth mode.
	Owner string
	// Name is the actor token.
	Name string
	// Subscribe lists the channels the agent joins; it implies read access.
	Subscribe []string
	// AllowSubscribe is the agent's read ACL; it defaults to Subscribe and must cover it.
	AllowSubscribe []string
	// AllowPublish lists the concrete channels the agent may post to.
	AllowPublish []string
	Role         string
	// Capabilities are what an agent may do beyond its baseline (authority.KnownCapabilities:
	// "spawn" lets it spawn agents through the manager).
	Capabilities []string
	// Expires overrides the profile's default lifetime; negative means never.
	Expires time.Duration
}

// readACL is the agent's read ACL: AllowSubscribe, or Subscribe when none is given.
func (r Request) readACL() []string {
	if len(r.AllowSubscribe) > 0 {
		return r.AllowSubscribe
	}
	return r.Subscribe
}

// Validate checks the request's name and subscriptions before anything is minted: each
// subscribed channel must be covered by the read ACL. The grant's own rows are checked when it is
// built. It returns a *wire.ValidationError.
func (r Request) Validate() error {
	if err := wire.ValidateAgentName(r.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	for _, c := range r.Capabilities {
		if err := authority.ValidateCapability(c); err != nil {
			return err
		}
	}
	for _, ch := range r.Subscribe {
		if err := wire.ValidateChannelPattern(ch); err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		if !wire.ChannelInAllow(r.readACL(), ch) {
			return &wire.ValidationError{Field: "subscribe", Value: ch, Rule: fmt.Sprintf("is not covered by allow-subscribe %q", r.readACL())}
		}
	}
	return nil
}

// WithDefaultPublish returns r with AllowPublish defaulted to the concrete channels of Subscribe
// (a pattern names no channel to post to) when it is nil: the one publish policy of every
// command that runs an agent. An empty, non-nil AllowPublish is a declared "none" and stays so.
func (r Request) WithDefaultPublish() Request {
	if r.AllowPublish != nil {
		return r
	}
	for _, ch := range r.Subscribe {
		if wire.IsConcreteChannel(ch) {
			r.AllowPublish = append(r.AllowPublish, ch)
		}
	}
	return r
}

// Principal returns the principal the request names: <Owner>.<Name>, the owner wire.DevOwner
// when none is given.
func (r Request) Principal() (wire.Principal, error) {
	owner := r.Owner
	if owner == "" {
		owner = wire.DevOwner
	}
	return wire.NewPrincipal(owner, r.Name)
}

// grant validates r and builds its grant.
func (r Request) grant() (authority.Grant, error) {
	if err := r.Validate(); err != nil {
		return authority.Grant{}, err
	}
	p, err := r.Principal()
	if err != nil {
		return authority.Grant{}, err
	}
	return authority.Grant{
		Principal: p, AllowPublish: r.AllowPublish, AllowSubscribe: slices.Clone(r.readACL()), Role: r.Role,
		Capabilities: slices.Clone(r.Capabilities),
	}, nil
}

// Mint mints a credential of any profile but agent without a ledger row: the mesh's own
// bootstrap credentials (the ledger's, the provisioner's before the auth store exists) and
// tests. Agent credentials are issued through a Ledger, so that each can be revoked. It returns
// a *wire.ValidationError for a bad name or ACL.
func Mint(kr *authority.Keyring, r Request) (*authority.Credential, error) {
	if r.Profile == authority.ProfileAgent {
		return nil, ErrAgentNeedsLedger
	}
	g, err := r.grant()
	if err != nil {
		return nil, err
	}
	sk, err := kr.Space(r.Space)
	if err != nil {
		return nil, err
	}
	return sk.Mint(authority.MintRequest{Profile: r.Profile, Grant: g, Expires: r.Expires})
}
