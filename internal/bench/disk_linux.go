package bench

import "golang.org/x/sys/unix"

// diskFree is the space an unprivileged user may still write in the file
// system of dir (statfs: available blocks × block size).
func diskFree(dir string) (free int64, known bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return int64(st.Bavail) * int64(st.Bsize), true, nil
}
