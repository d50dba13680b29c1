// Package agentbearer implements `cotal agent-bearer`: a managed agent's actor token exchanged for
// a bearer, for a process that connects in user-auth mode on its own.
package agentbearer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// exchangeWait bounds the exchange.
const exchangeWait = 30 * time.Second

// NewCmdAgentBearer returns the `cotal agent-bearer` command.
func NewCmdAgentBearer(f *factory.Factory) *cobra.Command {
	var owner, actor, tokenFile, meshURL string
	cmd := &cobra.Command{
		Use:   "agent-bearer --owner u_… --actor NAME --token-file PATH [--mesh URL]",
		Short: "Exchange a managed agent's actor token for a bearer and print it",
		Long: "Exchange the actor token in --token-file (a managed agent's secret, written 0600 by its\n" +
			"manager) for a bearer of at most five minutes, and print the bearer alone on stdout. With\n" +
			"--mesh it asks the exchange at URL (its public face); without, the auth service of the\n" +
			"running mesh of --dir on its loopback face. Run it again before the bearer expires: the\n" +
			"holder renews. A refused exchange says only that it was refused, and exits 4.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !wire.IsDerivedOwner(owner) {
				return &exit.UsageError{Err: fmt.Errorf("--owner %q is not an owner token (u_ and 26 base32 characters)", owner)}
			}
			if err := wire.ValidateActor(actor); err != nil {
				return &exit.UsageError{Err: fmt.Errorf("--actor: %w", err)}
			}
			if tokenFile == "" {
				return &exit.UsageError{Err: errors.New("--token-file is required")}
			}
			raw, err := os.ReadFile(tokenFile)
			if err != nil {
				return fmt.Errorf("read the actor token: %w", err)
			}
			url, capability, err := exchange(f, meshURL)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), exchangeWait)
			defer cancel()
			tok, _, err := userauth.FetchAgentBearer(ctx, userauth.NewHTTPClient(), url, capability,
				userauth.AgentCredentials{Owner: owner, Actor: actor, ActorToken: strings.TrimSpace(string(raw))})
			if errors.Is(err, userauth.ErrDenied) {
				return &exit.AuthError{Err: err}
			} else if err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "the agent's owner token")
	cmd.Flags().StringVar(&actor, "actor", "", "the agent's actor")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "the file holding the agent's actor token")
	cmd.Flags().StringVar(&meshURL, "mesh", "", "the exchange's URL (default: the running mesh's loopback face)")
	f.Target.Register(cmd.Flags())
	return cmd
}

// exchange returns where to exchange: --mesh, or the loopback face of the running mesh's auth
// service, with its capability.
func exchange(f *factory.Factory, meshURL string) (string, string, error) {
	if meshURL != "" {
		if err := oidc.CheckURL(meshURL); err != nil {
			return "", "", &exit.UsageError{Err: fmt.Errorf("--mesh %s: %w", meshURL, err)}
		}
		return meshURL, "", nil
	}
	d, _, sp, err := f.Mesh("an open mesh has no exchange: run `cotal up --user-auth`")
	if err != nil {
		return "", "", err
	}
	r, err := authservice.ReadReady(d.UserAuthDir(sp))
	if err != nil {
		return "", "", err
	}
	return r.URL, r.Cap, nil
}
