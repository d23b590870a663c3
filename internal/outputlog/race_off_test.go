//go:build !race

package outputlog

const raceEnabled = false
