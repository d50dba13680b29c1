// Command cotal runs and joins Cotal meshes. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gocotal/cotal/internal/cli"
	"github.com/gocotal/cotal/internal/cli/iostreams"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, iostreams.System(), os.Args[1:])
	stop()
	os.Exit(code)
}
