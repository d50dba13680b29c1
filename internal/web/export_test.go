package web

// SetMaxScan bounds the messages a history read walks, for a test, until it ends.
func SetMaxScan(n uint64) (restore func()) {
	old := maxScan
	maxScan = n
	return func() { maxScan = old }
}
