// Package version implements `cotal version`.
package version

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/wire"
)

// Info is what `cotal version --json` prints. The field names are a stable interface.
type Info struct {
	Version         string `json:"version"`
	Revision        string `json:"revision,omitempty"`
	Go              string `json:"go"`
	ProtocolVersion string `json:"protocolVersion"`
}

// Options are the inputs of `cotal version`.
type Options struct {
	IO   *iostreams.IOStreams
	JSON bool
	// Build reads the binary's build information; debug.ReadBuildInfo by default.
	Build func() (*debug.BuildInfo, bool)
}

// NewCmdVersion returns the `cotal version` command. runF runs it; nil means versionRun.
func NewCmdVersion(f *factory.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Build: debug.ReadBuildInfo}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of cotal and of the wire protocol it speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the version as JSON")
	return cmd
}

func versionRun(opts *Options) error {
	info := Read(opts.Build)
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		return enc.Encode(info)
	}
	line := fmt.Sprintf("cotal %s", info.Version)
	if info.Revision != "" {
		line += " (" + info.Revision + ")"
	}
	_, err := fmt.Fprintf(opts.IO.Out, "%s\nprotocol %s, %s\n", line, info.ProtocolVersion, info.Go)
	return err
}

// Read returns the version information of this binary from its build information. A binary built
// from a checkout (not from a tagged module) reports version "devel".
func Read(build func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: "devel", Go: runtime.Version(), ProtocolVersion: wire.ProtocolVersion}
	bi, ok := build()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			info.Revision = s.Value
		}
	}
	return info
}
