//go:build !linux

package bench

// spreadDirs: the flag is ext4's; elsewhere there is nothing to set.
func spreadDirs(string) (bool, error) { return false, nil }

func hasSpreadFlag(string) (bool, error) { return false, nil }
