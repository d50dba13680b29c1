// Package login implements `cotal login` and `cotal logout`: a person's login to a mesh that runs
// in user-auth mode, through its identity provider's device flow, cached for the commands that act
// as them (`cotal supervise --mesh`).
package login

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/failover"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/devidp"
	"github.com/gocotal/cotal/internal/userauth/oidc"
)

// Options are the inputs of `cotal login` and `cotal logout`.
type Options struct {
	*factory.Factory
	Mesh    string
	DevUser string
	Dir     string
}

// NewCmdLogin returns the `cotal login` command.
func NewCmdLogin(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "login [--mesh URL] [--dev-user NAME]",
		Short: "Log in to a user-auth mesh with its identity provider",
		Long: "Log in to the mesh whose exchange is at URL (what `cotal up --user-auth` prints; default: the\n" +
			"running mesh of this directory) with its identity provider's device flow: open the URL it\n" +
			"prints and confirm the code. The login is cached, 0600, in ~/.cotal/idp-sessions.json, for\n" +
			"`cotal supervise --mesh`. With --dev-user, log in to the mesh's development IdP as NAME\n" +
			"without a browser. What the login may do is what the mesh's operator granted\n" +
			"(`cotal actor grant NAME --scope S`).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return loginRun(cmd.Context(), o) },
	}
	cmd.Flags().StringVar(&o.Mesh, "mesh", "", "the mesh's exchange URL, or several comma-separated (default: the running mesh of --dir)")
	cmd.Flags().StringVar(&o.DevUser, "dev-user", "", "log in to the development IdP as this user, without a browser")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "the mesh directory whose running mesh --mesh defaults to")
	return cmd
}

// NewCmdLogout returns the `cotal logout` command.
func NewCmdLogout(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "logout [--mesh URL]",
		Short: "Forget the cached login to a user-auth mesh and revoke its refresh token at the identity provider",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := o.meshURL()
			if err != nil {
				return err
			}
			path, err := oidc.DefaultSessionsPath()
			if err != nil {
				return err
			}
			// The login is forgotten first, under the lock a running command's renewal takes, so
			// that renewal cannot save it back; its refresh token is revoked after, from memory.
			var sess oidc.Session
			err = oidc.UpdateSessions(cmd.Context(), path, func(all *oidc.Sessions) error {
				key, found, err := all.Find(failover.Split(url)...)
				if err != nil {
					return err
				}
				sess = found
				all.Delete(key)
				return nil
			})
			if errors.Is(err, oidc.ErrNoSession) {
				fmt.Fprintf(o.IO.ErrOut, "not logged in to %s\n", url)
				return nil
			}
			if err != nil {
				return err
			}
			revoked := revoke(cmd.Context(), sess)
			fmt.Fprintf(o.IO.ErrOut, "logged out of %s\n", url)
			switch {
			case errors.Is(revoked, oidc.ErrNoRevocation):
				fmt.Fprintf(o.IO.ErrOut, "note: %s offers no token revocation: the refresh token stays valid at it until it expires\n", sess.Issuer)
			case revoked != nil:
				return fmt.Errorf("the login is forgotten here, but its refresh token was not revoked at %s, where it stays valid until it expires: %w", sess.Issuer, revoked)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Mesh, "mesh", "", "the mesh's exchange URL, or several comma-separated (default: the running mesh of --dir)")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "the mesh directory whose running mesh --mesh defaults to")
	return cmd
}

// revoke revokes the session's refresh token at its identity provider (RFC 7009); nil when it
// holds none.
func revoke(ctx context.Context, sess oidc.Session) error {
	if sess.RefreshToken == "" {
		return nil
	}
	hc := userauth.NewHTTPClient()
	p, err := oidc.Discover(ctx, hc, sess.Issuer)
	if err != nil {
		return err
	}
	return p.Revoke(ctx, hc, sess.ClientID, sess.RefreshToken)
}

// meshURL returns --mesh (one exchange URL, or several comma-separated), or the exchange of the
// running mesh of --dir.
func (o *Options) meshURL() (string, error) {
	if o.Mesh != "" {
		if err := factory.CheckMeshURL(o.Mesh); err != nil {
			return "", err
		}
		return strings.Join(failover.New(failover.Split(o.Mesh)...).URLs(), ","), nil
	}
	_, st, err := mesh.Running(o.Dir)
	if err != nil {
		return "", &exit.UsageError{Err: fmt.Errorf("name the mesh with --mesh URL (%w)", err)}
	}
	if st.ExchangeURL == "" {
		return "", &exit.UsageError{Err: errors.New("the running mesh is not in user-auth mode (`cotal up --user-auth`): name another with --mesh URL")}
	}
	return st.ExchangeURL, nil
}

func loginRun(ctx context.Context, o *Options) error {
	url, err := o.meshURL()
	if err != nil {
		return err
	}
	if o.DevUser != "" {
		if err := devidp.ValidUser(o.DevUser); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--dev-user: %w", err)}
		}
	}
	hc := userauth.NewHTTPClient()
	doc, err := authservice.FetchMeshDocument(ctx, hc, url)
	if err != nil {
		return err
	}
	tok, id, err := authservice.Login(ctx, hc, doc, func(ctx context.Context, dc *oidc.DeviceCode) error {
		if o.DevUser != "" {
			if err := devidp.Approve(ctx, hc, doc.IdP.Issuer, dc.UserCode, o.DevUser); err != nil {
				return fmt.Errorf("approve the login as %s at the development IdP %s: %w", o.DevUser, doc.IdP.Issuer, err)
			}
			return nil
		}
		where := dc.VerificationURIComplete
		if where == "" {
			where = dc.VerificationURI
		}
		fmt.Fprintf(o.IO.ErrOut, "to log in to space %s, open %s and confirm the code %s\n", doc.Space, where, dc.UserCode)
		return nil
	})
	if err != nil {
		return fmt.Errorf("log in to %s: %w", url, err)
	}
	path, err := oidc.DefaultSessionsPath()
	if err != nil {
		return err
	}
	// The login is kept under the first URL named, and found under every exchange of the mesh:
	// a command names any node of a cluster, and goes on through the others.
	key, aliases := authservice.LoginKeys(url, doc)
	err = oidc.UpdateSessions(ctx, path, func(all *oidc.Sessions) error {
		// This login replaces the ones the URLs named find, and only those.
		for {
			old, _, err := all.Find(failover.Split(url)...)
			if err != nil {
				break
			}
			all.Delete(old)
		}
		return all.Put(key, oidc.Session{Issuer: id.Issuer, ClientID: doc.IdP.ClientID, IDToken: tok.IDToken,
			RefreshToken: tok.RefreshToken, Subject: id.Subject, Name: id.Name, ExpiresAt: id.Expires, Aliases: aliases})
	})
	if err != nil {
		return err
	}
	who := id.Subject
	if id.Name != "" && id.Name != id.Subject {
		who = fmt.Sprintf("%s (%s)", id.Name, id.Subject)
	}
	fmt.Fprintf(o.IO.ErrOut, "logged in to space %s at %s as %s\n", doc.Space, url, who)
	return nil
}
