package manager

import (
	"path/filepath"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/wire"
)

// BearerLaunch is how a managed agent of a user-auth mesh connects (a remote manager's): not a
// creds file, but the space's shared sentinel creds and bearers it exchanges its actor token for
// at the exchange, each living at most five minutes, renewed at every reconnect. Role and the
// channels are what its ledger row grants. Exchange is the exchange's URL, or several
// comma-separated (every authority node's of a cluster), tried in turn.
type BearerLaunch struct {
	Exchange       string
	ActorToken     string
	SentinelCreds  []byte
	Role           string
	AllowSubscribe []string
	AllowPublish   []string
}

// BearerMaterial is the launch material's part for a managed agent (BearerLaunch): the secrets
// are in files beside it.
type BearerMaterial struct {
	Exchange string `json:"exchange"`
	// LifecycleUID is the agent's lifecycle, the one its ledger row names.
	LifecycleUID string `json:"lifecycleUid"`
	// Token and Sentinel are the paths of the actor token and the sentinel creds.
	Token          string   `json:"token"`
	Sentinel       string   `json:"sentinel"`
	Role           string   `json:"role,omitempty"`
	AllowSubscribe []string `json:"allowSubscribe,omitempty"`
	AllowPublish   []string `json:"allowPublish,omitempty"`
}

// writeBearer writes a managed agent's secrets into dir and returns its material.
func writeBearer(dir string, uid wire.LifecycleUID, b *BearerLaunch) (*BearerMaterial, error) {
	m := &BearerMaterial{Exchange: b.Exchange, LifecycleUID: string(uid), Token: filepath.Join(dir, "actor.token"),
		Sentinel: filepath.Join(dir, "sentinel.creds"), Role: b.Role, AllowSubscribe: b.AllowSubscribe, AllowPublish: b.AllowPublish}
	if err := atomicfile.Write(m.Token, []byte(b.ActorToken), 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(m.Sentinel, b.SentinelCreds, 0o600); err != nil {
		return nil, err
	}
	return m, nil
}
