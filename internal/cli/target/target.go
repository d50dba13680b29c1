// Package target is the --dir and --space pair that names the running mesh and the space a
// command acts on, shared by the commands that take them.
package target

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// Flags are the values of --dir and --space.
type Flags struct {
	Dir   string
	Space string
}

// Register adds --dir and --space to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Dir, "dir", "", "the mesh directory (default: the nearest .cotal)")
	fs.StringVar(&f.Space, "space", "", "the space (default: the mesh's first)")
}

// Resolve finds the running mesh and the space the flags name; a space the mesh does not serve
// is a usage error. openRefusal, when set, is the error an open (unauthenticated) mesh gets
// from a command that needs credentials.
func (f *Flags) Resolve(openRefusal string) (mesh.Dir, *mesh.State, wire.Space, error) {
	d, st, err := mesh.Running(f.Dir)
	if err != nil {
		return d, nil, "", err
	}
	if st.Open && openRefusal != "" {
		return d, nil, "", errors.New(openRefusal)
	}
	sp, err := st.SpaceOf(f.Space)
	if err != nil {
		return d, nil, "", &exit.UsageError{Err: err}
	}
	return d, st, sp, nil
}
