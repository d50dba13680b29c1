package mesh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// Authority is a project's minting authority: its keyring and the spaces' signing keys. Whoever
// can open it can mint any identity in its spaces.
type Authority struct {
	dir     Dir
	keyring *authority.Keyring
}

// OpenAuthority opens (creating on first use) the keys in d.
func OpenAuthority(d Dir) (*Authority, error) {
	if err := atomicfile.MkdirPrivate(d.Path); err != nil {
		return nil, err
	}
	kr, err := authority.OpenKeyring(d.AuthDir())
	if err != nil {
		return nil, err
	}
	return &Authority{dir: d, keyring: kr}, nil
}

// Trust returns what a broker serving spaces must trust, creating missing space keys.
func (a *Authority) Trust(spaces []wire.Space) (broker.Trust, error) {
	op, err := a.keyring.OperatorJWT()
	if err != nil {
		return broker.Trust{}, err
	}
	sys, err := a.keyring.SystemAccountJWT()
	if err != nil {
		return broker.Trust{}, err
	}
	t := broker.Trust{OperatorJWT: op, SystemAccount: sys}
	for _, s := range spaces {
		sk, err := a.keyring.Space(s)
		if err != nil {
			return broker.Trust{}, err
		}
		acct, err := a.keyring.AccountJWT(sk)
		if err != nil {
			return broker.Trust{}, err
		}
		t.Accounts = append(t.Accounts, acct)
	}
	return t, nil
}

// MintRequest is a credential to mint for a principal local.<Name> in Space.
type MintRequest struct {
	Space   wire.Space
	Profile authority.Profile
	// Name is the actor token; the owner of static credentials is "local".
	Name string
	// Subscribe lists the channels the agent joins; it implies read access.
	Subscribe []string
	// AllowSubscribe is the agent's read ACL; it defaults to Subscribe and must cover it.
	AllowSubscribe []string
	// AllowPublish lists the concrete channels the agent may post to.
	AllowPublish []string
	Role         string
	// Expires overrides the profile's default lifetime; negative means never.
	Expires time.Duration
}

// readACL is the agent's read ACL: AllowSubscribe, or Subscribe when none is given.
func (r MintRequest) readACL() []string {
	if len(r.AllowSubscribe) > 0 {
		return r.AllowSubscribe
	}
	return r.Subscribe
}

// Mint mints a credential of any profile but agent, whose credentials go through the ledger
// (IssueAgent). It returns a *wire.ValidationError for a bad name or ACL.
func (a *Authority) Mint(req MintRequest) (*authority.Credential, error) {
	if req.Profile == authority.ProfileAgent {
		return nil, ErrAgentNeedsLedger
	}
	return a.mint(req)
}

// mint signs a credential without the ledger: the profiles that are not agents.
func (a *Authority) mint(req MintRequest) (*authority.Credential, error) {
	g, sk, err := a.grant(req)
	if err != nil {
		return nil, err
	}
	return sk.Mint(authority.MintRequest{Profile: req.Profile, Grant: g, Expires: req.Expires})
}

// Validate checks the request's name and subscriptions before anything is minted: each
// subscribed channel must be covered by the read ACL. The grant's own rows are checked when it is
// built. It returns a *wire.ValidationError.
func (r MintRequest) Validate() error {
	if err := wire.ValidateActor(r.Name); err != nil {
		return fmt.Errorf("name: %w", err)
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

// grant validates req and builds its grant, with the space's keys.
func (a *Authority) grant(req MintRequest) (authority.Grant, *authority.SpaceKeys, error) {
	if err := req.Validate(); err != nil {
		return authority.Grant{}, nil, err
	}
	sk, err := a.keyring.Space(req.Space)
	if err != nil {
		return authority.Grant{}, nil, err
	}
	p, err := wire.NewPrincipal(wire.DevOwner, req.Name)
	if err != nil {
		return authority.Grant{}, nil, err
	}
	return authority.Grant{Principal: p, AllowPublish: req.AllowPublish, AllowSubscribe: slices.Clone(req.readACL()), Role: req.Role}, sk, nil
}

// session connects to url as a one-shot provisioner credential, for the mesh's own setup.
func (a *Authority) session(ctx context.Context, url string, sp wire.Space) (*nats.Conn, jetstream.JetStream, error) {
	cred, err := a.mint(MintRequest{Space: sp, Profile: authority.ProfileProvisioner, Name: "cotal_provisioner"})
	if err != nil {
		return nil, nil, err
	}
	nc, err := Connect(ctx, url, cred)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream on %s: %w", url, err)
	}
	return nc, js, nil
}

// Provision provisions sp on the broker at url under a one-shot provisioner credential, so the
// setup itself runs with least privilege.
func (a *Authority) Provision(ctx context.Context, url string, sp wire.Space, defaults wire.ChannelDefaults) (*space.Report, error) {
	nc, js, err := a.session(ctx, url, sp)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	return space.Provision(ctx, js, sp, defaults)
}

// ProvisionAgent pre-creates the durables of an agent credential's lifecycle, minted from req,
// and records its read ACL for the delivery daemon.
//
// Provisioning is idempotent, so a JetStream API that did not answer is asked again: while the
// broker applies an account update (a revocation pushed for another lifecycle) the account's
// JetStream API can briefly have no responders.
func (a *Authority) ProvisionAgent(ctx context.Context, url string, cred *authority.Credential, req MintRequest) error {
	nc, js, err := a.session(ctx, url, req.Space)
	if err != nil {
		return err
	}
	defer nc.Close()
	l := wire.Lifecycle{Principal: cred.Principal, UID: cred.LifecycleUID}
	agent := space.Agent{Lifecycle: l, Role: req.Role, AllowSubscribe: req.readACL()}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err = space.ProvisionAgent(ctx, js, req.Space, agent)
		if err == nil || attempt == provisionAttempts || !errors.Is(err, nats.ErrNoResponders) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// provisionAttempts bounds how often ProvisionAgent asks a JetStream API that did not answer.
const provisionAttempts = 4

// Connect connects to url with cred, with the inbox prefix its grant allows set before anything
// else (SPEC §10), and checks the broker's version floor.
func Connect(ctx context.Context, url string, cred *authority.Credential, opts ...nats.Option) (*nats.Conn, error) {
	kp, err := jwt.ParseDecoratedUserNKey(cred.Creds)
	if err != nil {
		return nil, fmt.Errorf("read the seed of a %s credential: %w", cred.Profile, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("read the seed of a %s credential: %w", cred.Profile, err)
	}
	base := []nats.Option{
		// One-shot CLI connections may trip refusals they do not care about (an ordered consumer
		// cleaning itself up without the grant to); nats.go would print them to stderr.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.UserJWTAndSeed(cred.JWT, string(seed)),
		nats.CustomInboxPrefix(wire.ConnID(cred.PublicKey).InboxPrefix()),
		nats.Name(cred.Principal.String()),
	}
	return dial(ctx, url, append(base, opts...)...)
}

// dial connects and checks the broker's version.
func dial(ctx context.Context, url string, opts ...nats.Option) (*nats.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(d)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	if err := wire.CheckServerVersion(nc.ConnectedServerVersion()); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// JetStream connects to the running mesh st as a freshly minted one-shot credential of profile
// for local.<name> (or without credentials on an open mesh) and returns a JetStream context on it,
// with closeFn to close the connection.
func JetStream(ctx context.Context, d Dir, st *State, sp wire.Space, profile authority.Profile, name string) (js jetstream.JetStream, closeFn func(), err error) {
	var nc *nats.Conn
	if st.Open {
		if nc, err = dial(ctx, st.URL); err != nil {
			return nil, nil, err
		}
	} else {
		a, err := OpenAuthority(d)
		if err != nil {
			return nil, nil, err
		}
		cred, err := a.Issue(ctx, st.URL, MintRequest{Space: sp, Profile: profile, Name: name})
		if err != nil {
			return nil, nil, err
		}
		if nc, err = Connect(ctx, st.URL, cred); err != nil {
			return nil, nil, err
		}
	}
	if js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream on %s: %w", st.URL, err)
	}
	return js, nc.Close, nil
}
