package broker

import (
	"path/filepath"
	"syscall"
)

// accountStreamReserve is room kept beside each bounded account's own limit for what the server
// reserves per stream (a stream's max_bytes, such as the membership feed's 64 MiB).
const accountStreamReserve int64 = 1 << 30

// freeDisk returns the bytes free to an unprivileged user on the file system that holds dir, or
// the nearest of its parents that exists; 0 when none can be read.
func freeDisk(dir string) int64 {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var st syscall.Statfs_t
		if syscall.Statfs(d, &st) == nil {
			return int64(st.Bavail) * int64(st.Bsize) // Bsize is int64 on Linux, uint32 on macOS
		}
		if parent := filepath.Dir(d); parent == d {
			return 0
		}
	}
}
