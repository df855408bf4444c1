//go:build race

package audit

// raceEnabled: the race detector faults in its shadow memory as the
// program runs, so page faults are not counted under it.
const raceEnabled = true
