// Package cluster implements `cotal cluster`: what an authority node hands the other nodes of a
// mesh that runs on a NATS cluster.
package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// NewCmdCluster returns the `cotal cluster` command and its subcommands.
func NewCmdCluster(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Run a mesh on a NATS cluster: what the other nodes need",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdBundle(f), newCmdForget(f))
	return cmd
}

func newCmdBundle(f *factory.Factory) *cobra.Command {
	var dir, out, name string
	var spaces []string
	var keys bool
	cmd := &cobra.Command{
		Use:   "bundle --out FILE [--dir D] [--cluster-name N] [--space S] [--authority]",
		Short: "Write the bundle another node starts from (cotal up --cluster-bundle)",
		Long: "On an authority node (a mesh directory that holds the keys), write what another node of\n" +
			"the cluster needs to serve the mesh's broker: the cluster's name and route secret, and the\n" +
			"operator, system and space account JWTs. It holds no signing key, but its route secret\n" +
			"admits a broker to the cluster: the file is private to you, and should travel as a\n" +
			"credential does. The route secret is made on first use (then --cluster-name names the\n" +
			"cluster) and kept in the directory, so every later bundle and `cotal up --cluster-name`\n" +
			"share it.\n\n" +
			"With --authority the bundle also holds the keys of every space it names, and starts a second\n" +
			"authority node: it issues and revokes credentials as this one does, and its daemons stand by\n" +
			"and take over when this node dies. Whoever holds that file can mint any identity in those\n" +
			"spaces: move it to the second authority's machine only, and delete it once that node started.\n\n" +
			"Of a mesh that has run in user-auth mode (`cotal up --user-auth`), every bundle also carries\n" +
			"the auth accounts, and an authority bundle the callout keys, the owner secret, the bearer\n" +
			"keys and the pinned identity provider: every authority node then serves the callout and\n" +
			"the exchange alike. Write it after this node has started with --user-auth once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &exit.UsageError{Err: errors.New("--out FILE is required")}
			}
			var sps []wire.Space
			for _, s := range spaces {
				sp, err := wire.ParseSpace(s)
				if err != nil {
					return &exit.UsageError{Err: fmt.Errorf("--space: %w", err)}
				}
				sps = append(sps, sp)
			}
			d, err := mesh.FindDir(dir, ".")
			if err != nil {
				return err
			}
			if st, err := d.ReadState(); err == nil && st.Keyless {
				return errors.New("this node was started from a bundle and holds no keys: write bundles on an authority node")
			}
			if err := d.WriteBundle(out, name, sps, keys); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "wrote %s: start another node with cotal up --cluster-bundle %s --cluster-port PORT --routes ...\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the mesh directory (default: the nearest .cotal, or ./.cotal)")
	cmd.Flags().StringVar(&out, "out", "", "the file to write (required; written 0600)")
	cmd.Flags().StringVar(&name, "cluster-name", "", "the cluster's name, when this directory has no route secret yet")
	cmd.Flags().BoolVar(&keys, "authority", false, "include the spaces' signing keys, for a second authority node (the file then mints any identity)")
	cmd.Flags().StringSliceVar(&spaces, "space", []string{string(mesh.DefaultSpace)}, "the spaces the cluster serves (repeat or comma-separate)")
	return cmd
}

func newCmdForget(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "forget NODE",
		Short: "Forget an authority node taken out of a user-auth cluster",
		Long: "In a user-auth mesh on a cluster, every authority node's auth service records itself in\n" +
			"the space's user-auth store, and the mesh document and `cotal status` list every node\n" +
			"recorded within the last day: a node that stopped answering keeps `cotal status` failing\n" +
			"until it is back. After taking a node out of the cluster for good, forget it here by its\n" +
			"server name (--server-name, as `cotal status` lists it) on any authority node. A node whose\n" +
			"auth service recorded itself within the last 15 s is running, and is refused: stop it first.\n" +
			"A node stopped with Ctrl-C or `cotal down` removes its own record.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, kv, err := f.UserAuthStore(cmd.Context())
			if err != nil {
				return err
			}
			if err := authservice.ForgetNode(cmd.Context(), kv, args[0], time.Now()); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "forgot node %s: the mesh document and `cotal status` no longer list it\n", args[0])
			return nil
		},
	}
	f.Target.Register(cmd.Flags())
	return cmd
}
