// Package untrusted reads files and directories that a hostile process can
// write: the workspace the agent works in, its .git directory, the prompt
// file, a template's build context. What it guarantees, for every read
// through it:
//
//   - Nothing outside the root is read. Names are resolved with os.Root
//     (openat, component by component, on Unix): ".." and symlinks are
//     followed only while they stay inside the root; one that would leave
//     it is an error, whatever the race. ReadRegular and Walk follow no
//     symlink at all.
//   - Nothing blocks. Every open is non-blocking (O_NONBLOCK on Unix: a
//     FIFO opens at once without a writer), and is followed by an fstat of
//     the opened file, which must be a regular file (a directory for
//     ReadDirNames): a FIFO, socket, device or directory, even one swapped
//     in after a stat, is closed unread (ErrNotRegular).
//   - Nothing unbounded is read. Reads take a maximum from the caller and
//     fail (ErrTooLarge) rather than truncate when the file holds more;
//     directory listings and walk depth are bounded too.
//   - Walk reports a symlink as a symlink, with its lstat, and opens only
//     what lstat called a regular file or directory, and only if the file
//     it opened is that one (same device and inode): an entry replaced
//     between the lstat and the open is reported as changed (ErrChanged),
//     never read.
//
// What it does not do: a device node swapped in at the last moment is
// opened (non-blocking, never read) before fstat sees it; a regular file
// may change while it is read, as with any read.
package untrusted

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is the cause of opening anything but a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the cause of a read of a file larger than its maximum.
var ErrTooLarge = errors.New("file too large")

// Open opens name inside root for reading without blocking, and returns
// it with the FileInfo of the opened file. Anything but a regular file is
// closed unread and reported as ErrNotRegular.
func Open(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	return regular(f, name)
}

// ReadFile reads name inside root (see Open): at most max bytes, and an
// error wrapping ErrTooLarge if the file holds more.
func ReadFile(root *os.Root, name string, max int64) ([]byte, error) {
	f, info, err := Open(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, info, name, max)
}

// ReadRegular reads name inside root if lstat finds a regular file there,
// and what it opens is that file: unlike ReadFile, it follows no symlink,
// not even within root (fs.ErrNotExist when absent, ErrNotRegular for
// anything but a regular file, ErrChanged for a swap).
func ReadRegular(root *os.Root, name string, max int64) ([]byte, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	e := &Entry{Path: name, Info: info, dir: root, name: name}
	return e.ReadFile(max)
}

// OpenPath opens the file at path, following symlinks anywhere (the caller
// trusts the path itself, as the user named it), without blocking; like
// Open, it returns only a regular file.
func OpenPath(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	return regular(f, path)
}

// ReadPath reads the file at path, following symlinks anywhere (the caller
// trusts the path itself, as the user named it): at most max bytes, and an
// error wrapping ErrTooLarge if it holds more. Like OpenPath it does not
// block and reads only a regular file.
func ReadPath(path string, max int64) ([]byte, error) {
	f, info, err := OpenPath(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, info, path, max)
}

// AppendPath appends data to the regular file at path, following
// symlinks as OpenPath does, without blocking on a FIFO put there.
func AppendPath(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|nonblock, 0)
	if err != nil {
		return err
	}
	if f, _, err = regular(f, path); err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// regular returns f with its fstat if it is a regular file, and closes it
// otherwise.
func regular(f *os.File, name string) (*os.File, fs.FileInfo, error) {
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(name, info.Mode())
	}
	return f, info, nil
}

func notRegular(name string, m fs.FileMode) error {
	return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, Kind(m))}
}

// tooLargeError is the error of a read of name over its maximum.
func tooLargeError(name string, max int64) error {
	return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)}
}

// readAll reads f, whose fstat is info, refusing more than max bytes.
func readAll(f *os.File, info fs.FileInfo, name string, max int64) ([]byte, error) {
	tooLarge := tooLargeError(name, max)
	if info.Size() > max {
		return nil, tooLarge
	}
	// The file may have grown since the fstat: read one byte more than
	// allowed to tell. The buffer starts with room for the fstat's size
	// and the read that finds the end, so that an unchanged file takes two
	// reads and one allocation, not io.ReadAll's growth from 512 bytes.
	var buf bytes.Buffer
	buf.Grow(int(info.Size()) + bytes.MinRead)
	_, err := buf.ReadFrom(io.LimitReader(f, max+1))
	switch {
	case err != nil:
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	case int64(buf.Len()) > max:
		return nil, tooLarge
	}
	return buf.Bytes(), nil
}

// Kind names a file mode's type the way people say it.
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "regular file"
	case t&fs.ModeDir != 0:
		return "directory"
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "device"
	default:
		return "irregular file"
	}
}
