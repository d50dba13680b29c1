// Package backup makes and reads a mesh's backups: one gzipped tar holding a manifest, each
// stream and bucket of its spaces as JetStream's own snapshot (messages, consumers and their
// state, taken by the server), and the mesh's keys, sealed with a passphrase or left out. A
// backup is read twice when restored: once to check every file against the manifest's digests,
// once to restore, so a damaged backup restores nothing.
package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gocotal/cotal/wire"
)

// Format names the archive's format, in its manifest.
const Format = "cotal-go-backup/v1"

// The archive's entries besides the snapshots.
const (
	manifestName = "manifest.json"
	keysName     = "keys"
	streamsDir   = "streams/"
)

// maxManifest bounds the manifest a backup is read by.
const maxManifest = 4 << 20

// Manifest is a backup's first entry: what it holds, each file with its digest.
type Manifest struct {
	Format    string       `json:"format"`
	CreatedAt time.Time    `json:"createdAt"`
	Spaces    []wire.Space `json:"spaces"`
	Streams   []Stream     `json:"streams"`
	// Keys describes the mesh's keys; nil when the backup was made without them.
	Keys *Keys `json:"keys,omitempty"`
	// Files are the entries after the manifest, by name.
	Files map[string]File `json:"files"`
}

// Stream is one stream or bucket in a backup: its snapshot is streams/<name>.snap, and Config
// and State are what the server answered the snapshot with.
type Stream struct {
	Space    wire.Space      `json:"space"`
	Name     string          `json:"name"`
	Messages uint64          `json:"messages"`
	Config   json.RawMessage `json:"config"`
	State    json.RawMessage `json:"state"`
}

// File is one entry's size and SHA-256.
type File struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// StreamRef names a stream of a space to back up.
type StreamRef struct {
	Space wire.Space
	Name  string
}

// CreateOptions say what a backup holds besides the streams.
type CreateOptions struct {
	// KeysDir is the mesh's auth directory; empty leaves the keys out.
	KeysDir string
	// Passphrase seals the keys; empty stores them as they are on disk.
	Passphrase []byte
}

// Create snapshots streams, each on the connection conn returns for its space (one of the account
// that holds them), and writes the backup to out, 0600, atomically: out appears whole or not at
// all. A stream that does not exist is left out.
func Create(ctx context.Context, conn func(wire.Space) (*nats.Conn, error), streams []StreamRef, o CreateOptions, out string) (*Manifest, error) {
	work, err := os.MkdirTemp(filepath.Dir(out), ".cotal-backup-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	m := &Manifest{Format: Format, CreatedAt: time.Now().UTC(), Files: map[string]File{}}
	conns := map[wire.Space]*nats.Conn{}
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for _, ref := range streams {
		nc := conns[ref.Space]
		if nc == nil {
			if nc, err = conn(ref.Space); err != nil {
				return nil, err
			}
			conns[ref.Space] = nc
		}
		st, f, err := snapshotTo(ctx, nc, ref, filepath.Join(work, ref.Name+".snap"))
		if errors.Is(err, errNoStream) {
			continue
		}
		if err != nil {
			return nil, err
		}
		m.Streams = append(m.Streams, *st)
		m.Files[streamsDir+ref.Name+".snap"] = f
		if len(m.Spaces) == 0 || m.Spaces[len(m.Spaces)-1] != ref.Space {
			m.Spaces = append(m.Spaces, ref.Space)
		}
	}
	var keys []byte
	if o.KeysDir != "" {
		if keys, m.Keys, err = packKeys(o.KeysDir, o.Passphrase); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(keys)
		m.Files[keysName] = File{Size: int64(len(keys)), SHA256: hex.EncodeToString(sum[:])}
	}
	tmp := filepath.Join(work, "backup.tgz")
	if err := writeArchive(tmp, m, keys, work); err != nil {
		return nil, err
	}
	// A link, unlike a rename, never replaces a file that appeared at out meanwhile.
	if err := os.Link(tmp, out); err != nil {
		return nil, fmt.Errorf("write %s: %w", out, err)
	}
	return m, nil
}

// errNoStream is returned by snapshotTo for a stream that does not exist.
var errNoStream = errors.New("no such stream")

// snapshotTo writes ref's snapshot to path and returns its entry and its file's digest.
func snapshotTo(ctx context.Context, nc *nats.Conn, ref StreamRef, path string) (*Stream, File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, File{}, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	config, state, err := snapshot(ctx, nc, ref.Name, cw)
	if e, ok := errors.AsType[*apiError](err); ok && e.ErrCode == jsStreamNotFound {
		return nil, File{}, errNoStream
	}
	if err != nil {
		return nil, File{}, err
	}
	if err := f.Close(); err != nil {
		return nil, File{}, err
	}
	var s struct {
		Messages uint64 `json:"messages"`
	}
	_ = json.Unmarshal(state, &s) // the count is for people; the restore takes the state whole
	return &Stream{Space: ref.Space, Name: ref.Name, Messages: s.Messages, Config: config, State: state},
		File{Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// jsStreamNotFound is JetStream's error code for a stream that does not exist.
const jsStreamNotFound = 10059

// countWriter counts what it passes on.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeArchive writes the gzipped tar at path: the manifest, the keys, then each snapshot from
// work, and syncs it.
func writeArchive(path string, m *Manifest, keys []byte, work string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	add := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: size, Typeflag: tar.TypeReg, ModTime: m.CreatedAt}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add(manifestName, int64(len(raw)), strings.NewReader(string(raw))); err != nil {
		return err
	}
	if keys != nil {
		if err := add(keysName, int64(len(keys)), strings.NewReader(string(keys))); err != nil {
			return err
		}
	}
	for _, s := range m.Streams {
		name := streamsDir + s.Name + ".snap"
		snap, err := os.Open(filepath.Join(work, s.Name+".snap"))
		if err != nil {
			return err
		}
		err = add(name, m.Files[name].Size, snap)
		snap.Close()
		if err != nil {
			return err
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return err
	}
	return f.Sync()
}

// Archive is a backup whose every file matched its manifest when opened.
type Archive struct {
	Path     string
	Manifest *Manifest
	keys     []byte
}

// Open reads the backup at path and checks it: a manifest of this format first, then exactly the
// files it lists, each of its size and digest. A backup that fails a check is an error naming
// what is wrong.
func Open(path string) (*Archive, error) {
	a := &Archive{Path: path}
	seen := map[string]bool{}
	err := walk(path, func(name string, size int64, r io.Reader) error {
		if a.Manifest == nil {
			if name != manifestName {
				return fmt.Errorf("its first entry is %q, not the manifest", name)
			}
			raw, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
			if err != nil {
				return err
			}
			if len(raw) > maxManifest {
				return errors.New("its manifest is too large")
			}
			m := &Manifest{}
			if err := json.Unmarshal(raw, m); err != nil {
				return fmt.Errorf("its manifest does not decode: %w", err)
			}
			if m.Format != Format {
				return fmt.Errorf("its format is %q; this cotal reads %q", m.Format, Format)
			}
			if err := m.check(); err != nil {
				return err
			}
			a.Manifest = m
			return nil
		}
		want, ok := a.Manifest.Files[name]
		if !ok || seen[name] {
			return fmt.Errorf("it holds %q, which its manifest does not list once", name)
		}
		seen[name] = true
		h := sha256.New()
		var keep io.Writer = io.Discard
		var keys strings.Builder
		if name == keysName {
			keep = &keys
		}
		n, err := io.Copy(io.MultiWriter(h, keep), r)
		if err != nil {
			return err
		}
		if n != want.Size || n != size || hex.EncodeToString(h.Sum(nil)) != want.SHA256 {
			return fmt.Errorf("%s does not match its manifest (%d bytes, digest differs or size %d)", name, n, want.Size)
		}
		if name == keysName {
			a.keys = []byte(keys.String())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", path, err)
	}
	if a.Manifest == nil {
		return nil, fmt.Errorf("backup %s: it is empty", path)
	}
	for name := range a.Manifest.Files {
		if !seen[name] {
			return nil, fmt.Errorf("backup %s: %s is listed in its manifest and missing", path, name)
		}
	}
	return a, nil
}

// check reports a manifest whose entries do not agree with each other.
func (m *Manifest) check() error {
	if (m.Keys != nil) != (m.Files[keysName] != File{}) {
		return errors.New("its manifest's keys and files disagree")
	}
	for _, sp := range m.Spaces {
		if _, err := wire.ParseSpace(string(sp)); err != nil {
			return fmt.Errorf("its manifest's spaces: %w", err)
		}
	}
	names := map[string]bool{}
	for _, s := range m.Streams {
		if !slices.Contains(m.Spaces, s.Space) {
			return fmt.Errorf("its manifest's stream %s is of space %q, which it does not list", s.Name, s.Space)
		}
		if s.Name == "" || strings.ContainsAny(s.Name, "/\\. *>") || names[s.Name] {
			return fmt.Errorf("its manifest names the stream %q, which is not a stream's name or is named twice", s.Name)
		}
		names[s.Name] = true
		if _, ok := m.Files[streamsDir+s.Name+".snap"]; !ok {
			return fmt.Errorf("its manifest lists no snapshot for %s", s.Name)
		}
	}
	want := len(m.Streams)
	if m.Keys != nil {
		want++
	}
	if len(m.Files) != want {
		return errors.New("its manifest lists files it has no stream or keys for")
	}
	return nil
}

// walk calls fn with each entry of the gzipped tar at path, in order.
func walk(path string, fn func(name string, size int64, r io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("not a gzipped archive: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("a damaged archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("it holds %q, which is not a file", h.Name)
		}
		if err := fn(h.Name, h.Size, tr); err != nil {
			return err
		}
	}
}

// RestoreKeys writes the backup's keys into dir, opened with pass when they are encrypted.
func (a *Archive) RestoreKeys(dir string, pass []byte) error {
	if a.Manifest.Keys == nil {
		return errors.New("the backup was made without the mesh's keys (--no-keys): its credentials and ledger need them")
	}
	tarred, err := a.Manifest.Keys.open(a.keys, pass)
	if err != nil {
		return err
	}
	return unpackKeys(tarred, dir)
}

// CheckPassphrase reports whether pass opens the backup's keys (always, for keys stored plain).
func (a *Archive) CheckPassphrase(pass []byte) error {
	if a.Manifest.Keys == nil {
		return nil
	}
	_, err := a.Manifest.Keys.open(a.keys, pass)
	return err
}

// RestoreStreams creates every stream of space sp in the backup on nc (a connection of the
// account that is to hold them; none of them may exist), each with replicas copies.
func (a *Archive) RestoreStreams(ctx context.Context, nc *nats.Conn, sp wire.Space, replicas int) error {
	byName := map[string]Stream{}
	for _, s := range a.Manifest.Streams {
		if s.Space == sp {
			byName[s.Name] = s
		}
	}
	return walk(a.Path, func(name string, _ int64, r io.Reader) error {
		stream, ok := strings.CutPrefix(name, streamsDir)
		if !ok {
			return nil
		}
		s, ok := byName[strings.TrimSuffix(stream, ".snap")]
		if !ok {
			return nil // another space's
		}
		config, err := withReplicas(s.Config, replicas)
		if err != nil {
			return fmt.Errorf("restore %s: %w", s.Name, err)
		}
		// The file was checked when opened; it is checked again as it is read, so one changed
		// since fails the restore (whose caller then removes what it restored).
		h := sha256.New()
		if err := restore(ctx, nc, s.Name, config, s.State, io.TeeReader(r, h)); err != nil {
			return err
		}
		if hex.EncodeToString(h.Sum(nil)) != a.Manifest.Files[name].SHA256 {
			return fmt.Errorf("restore %s: the backup changed since it was checked", s.Name)
		}
		return nil
	})
}

// withReplicas returns a stream config with its replica count set.
func withReplicas(config json.RawMessage, replicas int) (json.RawMessage, error) {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("its config does not decode: %w", err)
	}
	c["num_replicas"] = json.RawMessage(fmt.Sprint(max(replicas, 1)))
	return json.Marshal(c)
}
