package loop

import (
	"io/fs"
	"syscall"
)

// inode returns a file's inode number and change time (ns), which no
// write can leave as they were.
func inode(info fs.FileInfo) (uint64, int64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Ino, st.Ctim.Nano()
}
