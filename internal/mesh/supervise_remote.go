package mesh

import (
	"context"

	"github.com/gocotal/cotal/internal/remotemgr"
)

// RemoteManagerName names a remote manager's instance in the mesh directory of the machine it runs
// on.
const RemoteManagerName = "remote"

// SuperviseRemote runs a remote manager for o.Space from mesh directory d (remotemgr.Supervise):
// it claims the directory's remote manager instance for as long as it runs, and writes its
// agents' launch material under d.
func SuperviseRemote(ctx context.Context, d Dir, o remotemgr.SuperviseConfig) error {
	inst, err := d.claimManagerInstance(o.Space, RemoteManagerName)
	if err != nil {
		return err
	}
	defer inst.release()
	o.Instance, o.MaterialDir, o.AwaitWake = inst.id, d.launchDir(o.Space), awaitWake(o.Space)
	return remotemgr.Supervise(ctx, o)
}
