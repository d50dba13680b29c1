//go:build !unix

package bench

// openFileLimit is the process's limit on open files, if the system tells it.
func openFileLimit() (uint64, bool) { return 0, false }
