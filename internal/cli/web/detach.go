package web

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
	detachpkg "github.com/gocotal/cotal/internal/cli/detach"
)

// detachWait bounds how long `cotal web --detach` waits for the dashboard to serve.
const detachWait = 30 * time.Second

// detach starts `cotal web` again in the background, as its own session so a closed terminal
// does not stop it, with its output in .cotal/web.log, waits until it records itself as serving,
// and prints its launch URL, which it then strikes from the record.
func detach(ctx context.Context, o *Options) error {
	d, _, _, err := o.Mesh("")
	if err != nil {
		return err
	}
	if d.Path == "" {
		return errors.New("--detach needs the mesh's directory: a mesh reached by its server has none to record the dashboard in")
	}
	if ws, err := d.ReadWebState(); err == nil {
		return fmt.Errorf("the dashboard of this mesh already runs at %s (pid %d): `cotal down web` stops it", ws.URL, ws.PID)
	}
	if err := atomicfile.MkdirPrivate(d.Path); err != nil {
		return err
	}
	pid, exited, err := detachpkg.Start(append([]string{"web", "--dir", d.Path}, o.setFlags...), d.WebLogPath(), envDetached+"=1")
	if err != nil {
		return err
	}
	deadline := time.NewTimer(detachWait)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ws, err := d.ReadWebState(); err == nil && ws.PID == pid && ws.Open != "" {
			fmt.Fprintln(o.IO.Out, ws.Open)
			fmt.Fprintf(o.IO.ErrOut, "serving the dashboard of space %s in the background (pid %d, logging to %s); open the URL above in one browser; `cotal down web` stops it\n", ws.Space, pid, d.WebLogPath())
			return d.ForgetWebOpen(ws)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the detached dashboard exited (%v); see %s", err, d.WebLogPath())
		case <-deadline.C:
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("the detached dashboard did not serve within %s; see %s", detachWait, d.WebLogPath())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
