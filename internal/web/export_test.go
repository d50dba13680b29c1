package web

// SetMaxScan bounds the messages a history read walks, for a test, until it ends.
func SetMaxScan(n uint64) (restore func()) {
	old := maxScan.Swap(n)
	return func() { maxScan.Store(old) }
}
