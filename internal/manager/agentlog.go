package manager

import (
	"os"
	"sync"
)

// AgentLogMax is the most an agent's log file holds: past it, the file becomes <name>.log.1
// (replacing the one before) and a new one starts.
const AgentLogMax = 8 << 20

// agentLog appends what an agent's terminal shows to its log file, so what the agent said
// outlives its manager, a kill included: each chunk is written as it is read.
type agentLog struct {
	path string
	mu   sync.Mutex
}

// Write appends p, rotating the file first when p would take it past AgentLogMax.
func (l *agentLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fi, err := os.Stat(l.path); err == nil && fi.Size()+int64(len(p)) > AgentLogMax {
		_ = os.Rename(l.path, l.path+".1") // a failed rename only lets this file grow
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := f.Write(p)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}
