//go:build unix

package docker

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileID is a file's identity: its device and inode numbers (stat(2)).
func fileID(fi fs.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d:%d", uint64(st.Dev), uint64(st.Ino)), true
}
