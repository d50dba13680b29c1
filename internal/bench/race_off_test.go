//go:build !race

package bench

// raceDetector reports whether the tests run under the race detector.
const raceDetector = false
