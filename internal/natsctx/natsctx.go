// Package natsctx writes contexts of the nats CLI (NATS ADR-21): named JSON files under
// $XDG_CONFIG_HOME/nats/context ($HOME/.config/nats/context by default) that `nats --context
// NAME` connects with.
package natsctx

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gocotal/cotal/internal/atomicfile"
)

// Context is what a written context holds: the servers, the credential and the inbox prefix the
// credential may subscribe under. The key names are ADR-21's.
type Context struct {
	Description string `json:"description"`
	URL         string `json:"url"`
	Creds       string `json:"creds"`
	InboxPrefix string `json:"inbox_prefix"`
}

// Owned marks the description of every context this package writes: only such a context is ever
// replaced.
const Owned = "cotal: "

// maxName bounds a context's name.
const maxName = 64

// ValidName checks name as a context name: 1 to 64 characters of [A-Za-z0-9_.-], not starting
// with '.', so it names one file in the context directory and nothing else.
func ValidName(name string) error {
	if name == "" || len(name) > maxName || strings.HasPrefix(name, ".") {
		return fmt.Errorf("nats context %q: must be 1 to %d characters, not starting with '.'", name, maxName)
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("nats context %q: must be characters of [A-Za-z0-9_.-]", name)
		}
	}
	return nil
}

// Dir returns the nats CLI's context directory.
func Dir() (string, error) {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the nats context directory: %w", err)
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "nats", "context"), nil
}

// Write writes c as the context name (0600, in a directory it creates 0700) and returns its path.
// The description is prefixed with Owned. A context of that name that this package did not write
// is left alone and refused.
func Write(name string, c Context) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".json")
	if raw, err := os.ReadFile(path); err == nil {
		var old Context
		if json.Unmarshal(raw, &old) != nil || !strings.HasPrefix(old.Description, Owned) {
			return "", fmt.Errorf("nats context %s exists and was not written by cotal (%s): it is left untouched; choose another name or remove it", name, path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	c.Description = Owned + c.Description
	raw, _ := json.MarshalIndent(c, "", "  ") // always encodes
	if err := atomicfile.Write(path, append(raw, '\n'), 0o600); err != nil {
		return "", err
	}
	return path, nil
}
