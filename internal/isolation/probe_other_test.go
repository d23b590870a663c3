//go:build !linux

package isolation

func runProbe(args []string) int { return 2 }
