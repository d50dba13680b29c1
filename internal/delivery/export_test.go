package delivery

import "context"

// SetHook sets d's handler hook (see Daemon.hook). Call it before Run.
func SetHook(d *Daemon, hook func(ctx context.Context, handler string) (end func())) { d.hook = hook }

// DeleteAttempts is how many times the reader tries to delete an inbox entry (deleteAttempts).
const DeleteAttempts = deleteAttempts
