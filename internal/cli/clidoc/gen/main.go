// Command gen writes the cotal command reference into the directory it is given (docs/cli).
package main

import (
	"fmt"
	"os"

	"github.com/gocotal/cotal/internal/cli/clidoc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen DIR")
		os.Exit(2)
	}
	if err := clidoc.Write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
