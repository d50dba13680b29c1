package userauth

import (
	"fmt"
	"slices"
	"strings"
)

// The ledger scopes (capability tokens). No scope implies another: supervise is never implied by
// admin or spawn, and neither of those by supervise (SPEC §13.1).
const (
	// ScopeSpawn lets an actor launch, list, stop and attach to its own owner's agents.
	ScopeSpawn = "spawn"
	// ScopeAdmin is operator authority over other owners. It is never granted from a manifest.
	ScopeAdmin = "admin"
	// ScopeSupervise lets a human run a remote manager (the manager-service authority).
	ScopeSupervise = "supervise"
	// ScopeRun lets an actor start workflow runs.
	ScopeRun = "run"
	// ScopeRolePrefix starts a role scope "role:<r>", which lets an actor hand role r down to
	// the agents it spawns.
	ScopeRolePrefix = "role:"
)

// maxScopes bounds a scope list: every entry rides each bearer, and a bearer is capped at 8 KiB.
const maxScopes = 64

// ValidateScope checks that s is a known scope token: spawn, admin, supervise, run or
// role:<r> with r a role token. Anything else, including a well-formed unknown token, is refused:
// an unknown capability would be a grant nobody can reason about.
func ValidateScope(s string) error {
	if s == "" || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:-") != "" {
		return fmt.Errorf("scope %q must be one token of [A-Za-z0-9_:-]", s)
	}
	switch s {
	case ScopeSpawn, ScopeAdmin, ScopeSupervise, ScopeRun:
		return nil
	}
	if role, ok := strings.CutPrefix(s, ScopeRolePrefix); ok {
		if err := ValidateRole(role); err != nil {
			return fmt.Errorf("scope %q: %w", s, err)
		}
		return nil
	}
	return fmt.Errorf("unknown scope %q (known: spawn, admin, supervise, run, role:<r>)", s)
}

// ValidateScopes checks every entry of scopes with ValidateScope and refuses duplicates and lists
// longer than 64.
func ValidateScopes(scopes []string) error {
	if len(scopes) > maxScopes {
		return fmt.Errorf("%d scopes, at most %d", len(scopes), maxScopes)
	}
	for i, s := range scopes {
		if err := ValidateScope(s); err != nil {
			return err
		}
		if slices.Contains(scopes[:i], s) {
			return fmt.Errorf("scope %q listed twice", s)
		}
	}
	return nil
}

// ValidateRole checks that role is one token of [A-Za-z0-9_-], at most 64 characters: it ends up
// in role:<r> scopes and svc_<role> durable names.
func ValidateRole(role string) error {
	if role == "" || len(role) > 64 || strings.Trim(role, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
		return fmt.Errorf("role %q must be 1 to 64 characters of [A-Za-z0-9_-]", role)
	}
	return nil
}

// Within reports whether every scope in scopes is also in of, compared exactly: a bearer's
// act.scope must stay within its row's current scope, a managed row's within its spawner's.
func Within(scopes, of []string) bool {
	for _, s := range scopes {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}
