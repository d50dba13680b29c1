package jsapi

import "time"

// SetRequestWait shortens Request's wait for one try, for the test's life.
func SetRequestWait(d time.Duration) (restore func()) {
	old := requestWait
	requestWait = d
	return func() { requestWait = old }
}
