// Package backup implements `cotal backup create` and `cotal backup verify`; `cotal up --restore`
// starts a mesh from what they make.
package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/backup"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// EnvPassphrase names the environment variable a backup's passphrase is read from when no
// --passphrase-file is given.
const EnvPassphrase = "COTAL_BACKUP_PASSPHRASE"

// maxPassphrase bounds a passphrase file.
const maxPassphrase = 4 << 10

// Passphrase returns the passphrase in file (its first line), or else in $COTAL_BACKUP_PASSPHRASE,
// or nil when neither gives one.
func Passphrase(file string) ([]byte, error) {
	if file == "" {
		if p := os.Getenv(EnvPassphrase); p != "" {
			return []byte(p), nil
		}
		return nil, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, &exit.UsageError{Err: fmt.Errorf("--passphrase-file: %w", err)}
	}
	if len(raw) > maxPassphrase {
		return nil, &exit.UsageError{Err: fmt.Errorf("--passphrase-file %s: longer than %d bytes", file, maxPassphrase)}
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return nil, &exit.UsageError{Err: fmt.Errorf("--passphrase-file %s: its first line is empty", file)}
	}
	return []byte(line), nil
}

// NewCmdBackup returns `cotal backup` with its create and verify subcommands.
func NewCmdBackup(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Back a mesh up to one file, and check a backup",
	}
	cmd.AddCommand(newCmdCreate(f), newCmdVerify(f))
	return cmd
}

// createOptions are the inputs of `cotal backup create`.
type createOptions struct {
	*factory.Factory
	out, passFile string
	noKeys        bool
}

func newCmdCreate(f *factory.Factory) *cobra.Command {
	o := &createOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "create --out FILE",
		Short: "Snapshot the running mesh's streams, buckets, ledger and keys into one file",
		Long: "Write a gzipped tar holding every stream and bucket of the mesh's spaces as JetStream's own\n" +
			"snapshot (messages, and the consumers with their state: channel history, DM inboxes, the\n" +
			"channel registry, the ledger and the credentials it issued), and the mesh's keys, sealed\n" +
			"with the passphrase in --passphrase-file or $" + EnvPassphrase + " (Argon2id and AES-256-GCM).\n" +
			"Without a passphrase the keys are stored as they are on disk, and the file is as secret as\n" +
			".cotal/auth; --no-keys leaves them out (the backup then restores an open mesh only).\n" +
			"`cotal up --restore FILE --dir NEW` starts a mesh from it; `cotal backup verify FILE`\n" +
			"checks it. The mesh keeps serving while each stream is snapshotted.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return create(cmd.Context(), o) },
	}
	cmd.Flags().StringVar(&o.Target.Dir, "dir", "", "the mesh directory (default: the nearest .cotal)")
	cmd.Flags().StringVar(&o.out, "out", "", "the backup file to write (it must not exist)")
	cmd.Flags().StringVar(&o.passFile, "passphrase-file", "", "seal the keys with the passphrase on this file's first line (default: $"+EnvPassphrase+")")
	cmd.Flags().BoolVar(&o.noKeys, "no-keys", false, "leave the mesh's keys out of the backup")
	return cmd
}

// backupWait bounds a backup.
const backupWait = 30 * time.Minute

func create(ctx context.Context, o *createOptions) error {
	if o.out == "" {
		return &exit.UsageError{Err: errors.New("--out FILE names the backup to write")}
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return &exit.UsageError{Err: fmt.Errorf("--out: %w", err)}
	}
	if _, err := os.Lstat(out); err == nil {
		return &exit.UsageError{Err: fmt.Errorf("--out %s: the file exists; a backup never replaces one", o.out)}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	pass, err := Passphrase(o.passFile)
	if err != nil {
		return err
	}
	if o.noKeys && len(pass) > 0 && o.passFile != "" {
		return &exit.UsageError{Err: errors.New("--no-keys leaves out the keys --passphrase-file would seal")}
	}
	d, st, _, err := o.Mesh("")
	if err != nil {
		return err
	}
	if st.Creds != "" || d.Path == "" {
		return fmt.Errorf("mesh %q is reached through a credential file: a backup needs the mesh's directory and keys", st.Registered)
	}
	ctx, cancel := context.WithTimeout(ctx, backupWait)
	defer cancel()
	opts := backup.CreateOptions{}
	if !st.Open && !o.noKeys {
		opts.KeysDir, opts.Passphrase = d.AuthDir(), pass
	}
	var refs []backup.StreamRef
	for _, sp := range st.Spaces {
		for _, name := range space.Streams(sp) {
			refs = append(refs, backup.StreamRef{Space: sp, Name: name})
		}
	}
	// Each space's streams live in its store account: a connection each.
	conn := func(sp wire.Space) (*nats.Conn, error) { return storeConn(ctx, d, st, sp) }
	m, err := backup.Create(ctx, conn, refs, opts, out)
	if err != nil {
		return err
	}
	if opts.KeysDir != "" && len(pass) == 0 {
		fmt.Fprintf(o.IO.ErrOut, "warning: the backup holds the mesh's keys unsealed: keep %s as secret as .cotal/auth, or seal them with --passphrase-file\n", o.out)
	}
	var msgs uint64
	for _, s := range m.Streams {
		msgs += s.Messages
	}
	fmt.Fprintf(o.IO.Out, "backed up space %s: %d streams and buckets, %d messages, keys %s, to %s\n", strings.Join(spaceNames(m), ", "), len(m.Streams), msgs, keysSaid(m), out)
	return nil
}

// storeConn connects to sp's store account (the open mesh's only account, without keys) to
// snapshot its streams.
func storeConn(ctx context.Context, d mesh.Dir, st *mesh.State, sp wire.Space) (*nats.Conn, error) {
	if st.Open {
		return dial.Anonymous(ctx, st.URL)
	}
	kr, err := d.OpenKeyring()
	if err != nil {
		return nil, err
	}
	cred, err := kr.MintStoreUser(sp, "cotal_backup", backupWait)
	if err != nil {
		return nil, err
	}
	return dial.As(ctx, st.URL, cred)
}

func newCmdVerify(f *factory.Factory) *cobra.Command {
	var passFile string
	cmd := &cobra.Command{
		Use:   "verify FILE",
		Short: "Check a backup: every file against its manifest, and the passphrase",
		Long: "Read the backup through: its manifest, then every snapshot and the keys, each against the\n" +
			"size and SHA-256 its manifest lists, and, with a passphrase (--passphrase-file or\n" +
			"$" + EnvPassphrase + "), that it opens the sealed keys. Exits 0 when the backup would restore.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pass, err := Passphrase(passFile)
			if err != nil {
				return err
			}
			a, err := backup.Open(args[0])
			if err != nil {
				return err
			}
			if len(pass) > 0 {
				if err := a.CheckPassphrase(pass); err != nil {
					return err
				}
			}
			m := a.Manifest
			fmt.Fprintf(f.IO.Out, "backup %s of space %s, made %s: %d streams and buckets, keys %s; every file matches its manifest\n",
				args[0], strings.Join(spaceNames(m), ", "), m.CreatedAt.Format(time.RFC3339), len(m.Streams), keysSaid(m))
			return nil
		},
	}
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "check that the passphrase on this file's first line opens the keys (default: $"+EnvPassphrase+")")
	return cmd
}

// spaceNames returns the backup's spaces as strings.
func spaceNames(m *backup.Manifest) []string {
	out := make([]string, len(m.Spaces))
	for i, sp := range m.Spaces {
		out[i] = string(sp)
	}
	return out
}

// keysSaid says how the backup holds the keys.
func keysSaid(m *backup.Manifest) string {
	switch {
	case m.Keys == nil:
		return "left out"
	case m.Keys.Encrypted:
		return "sealed with a passphrase"
	}
	return "unsealed"
}
