//go:build unix

package untrusted

import (
	"io/fs"
	"syscall"
)

// ReadPath reads the file at path, following symlinks anywhere (the caller
// trusts the path itself, as the user named it): at most max bytes, and an
// error wrapping ErrTooLarge if it holds more. Like OpenPath it does not
// block and reads only a regular file.
//
// It reads with system calls rather than an os.File: opening one starts
// Go's network poller, which cost a process that reads one file a tenth
// of its run time (`sbx validate FILE`, BENCHMARKS.md).
func ReadPath(path string, max int64) ([]byte, error) {
	var fd int
	err := retry(func() (err error) {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := retry(func() error { return syscall.Fstat(fd, &st) }); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if m := fileType(uint32(st.Mode)); m != 0 {
		return nil, notRegular(path, m)
	}
	tooLarge := tooLargeError(path, max)
	if st.Size > max {
		return nil, tooLarge
	}
	// The file may have grown since the fstat: room for one byte more
	// than allowed tells.
	buf := make([]byte, 0, st.Size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		var n int
		err := retry(func() (err error) {
			n, err = syscall.Read(fd, buf[len(buf):min(int64(cap(buf)), max+1)])
			return err
		})
		switch {
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		if buf = buf[:len(buf)+n]; int64(len(buf)) > max {
			return nil, tooLarge
		}
	}
}

// retry calls f again while it is interrupted by a signal.
func retry(f func() error) error {
	for {
		if err := f(); err != syscall.EINTR {
			return err
		}
	}
}

// fileType is the type of a file that is not a regular one, as in an
// fs.FileMode; 0 for a regular file.
func fileType(mode uint32) fs.FileMode {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return 0
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
