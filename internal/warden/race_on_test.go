//go:build race

package warden_test

// raceDetector reports whether the tests run under the race detector (as CI runs them), which
// slows every step several times over: the flood test then runs its bounded form.
const raceDetector = true
