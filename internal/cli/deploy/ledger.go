package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/wire"
)

// LedgerAPIVersion is a deploy ledger's version.
const LedgerAPIVersion = "cotal-ledger/v1"

// Ledger is what one additive deploy (`cotal spawn -f`) created, and so may remove: its channels,
// and its agents by name and the identity and lifecycle they were launched as. It only grows
// until `cotal down -f` removes what it lists.
type Ledger struct {
	APIVersion string `json:"apiVersion"`
	RunID      string `json:"runId"`
	Space      string `json:"space"`
	// Manifest is the absolute path of the manifest the run deployed.
	Manifest string `json:"manifest"`
	// Owner is the person whose deploy it was (their owner token; `spawn -f --mesh`); empty for
	// the operator's.
	Owner    string       `json:"owner,omitempty"`
	Channels []string     `json:"channels"`
	Agents   []OwnedAgent `json:"agents"`
}

// OwnedAgent is an agent a run launched: its name, principal (id), lifecycle and launch hash.
type OwnedAgent struct {
	Name         string `json:"name"`
	ID           string `json:"id"`
	LifecycleUID string `json:"lifecycleUid"`
	Hash         string `json:"hash"`
}

// LedgerDir is where a mesh directory's deploy ledgers live.
func LedgerDir(meshDir string) string { return filepath.Join(meshDir, "manifests") }

// Agent returns the owned agent of the name, or nil.
func (l *Ledger) Agent(name string) *OwnedAgent {
	for i := range l.Agents {
		if l.Agents[i].Name == name {
			return &l.Agents[i]
		}
	}
	return nil
}

// Own records an agent as launched by the run, replacing an earlier record of its name.
func (l *Ledger) Own(a OwnedAgent) {
	l.Agents = slices.DeleteFunc(l.Agents, func(o OwnedAgent) bool { return o.Name == a.Name })
	l.Agents = append(l.Agents, a)
}

// Empty reports whether the run owns nothing any more.
func (l *Ledger) Empty() bool { return len(l.Channels) == 0 && len(l.Agents) == 0 }

// Save writes the ledger to dir as <runId>.json (0600, atomically).
func (l *Ledger) Save(dir string) error {
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, l.RunID+".json"), append(raw, '\n'), 0o600)
}

// Remove deletes the ledger from dir.
func (l *Ledger) Remove(dir string) error {
	err := os.Remove(filepath.Join(dir, l.RunID+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ReadLedger reads and checks the ledger of run id in dir. A ledger is untrusted: it is checked
// before anything is removed on its word.
func ReadLedger(dir, id string) (*Ledger, error) {
	if err := manifest.ValidateRunID(id); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no deploy ledger of run %s in %s", id, dir)
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var l Ledger
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("deploy ledger of run %s: %w", id, err)
	}
	if l.APIVersion != LedgerAPIVersion || l.RunID != id {
		return nil, fmt.Errorf("deploy ledger of run %s: not a %s ledger of that run", id, LedgerAPIVersion)
	}
	if l.Owner != "" && !wire.IsDerivedOwner(l.Owner) {
		return nil, fmt.Errorf("deploy ledger of run %s: owner %q is not a person's owner token", id, l.Owner)
	}
	return &l, nil
}

// LedgerOf returns the ledger of the run that deployed the manifest at path (absolute) into
// space, or nil when none did.
func LedgerOf(dir, path, space string) (*Ledger, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		l, err := ReadLedger(dir, filepath.Base(f[:len(f)-len(".json")]))
		if err != nil {
			return nil, err
		}
		if l.Manifest == path && l.Space == space {
			return l, nil
		}
	}
	return nil, nil
}
