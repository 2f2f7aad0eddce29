//go:build race

package vector

// raceEnabled shrinks the heaviest tests under the race detector, which
// slows the graph build by an order of magnitude.
const raceEnabled = true
