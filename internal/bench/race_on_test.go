//go:build race

package bench

// raceDetector reports whether the tests run under the race detector, which slows each
// connection several times over: the roster test then holds a bounded roster.
const raceDetector = true
