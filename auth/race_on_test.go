//go:build race

package auth_test

// raceEnabled: the race detector slows every statement-free
// authentication several times over, while the fixed cost of a listener
// reconnection stays the same, so ratios of the two are not measured
// under it.
const raceEnabled = true
