package untrusted

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
)

// Bounds of a walk: each level of depth holds one open directory, and a
// directory's names are held in memory while it is walked.
const (
	MaxDepth    = 256
	MaxDirNames = 1 << 20
)

// ErrChanged is the cause of reading an entry that is no longer the file
// Walk found (replaced, or swapped for a symlink, since its lstat).
var ErrChanged = errors.New("changed while being read")

// Entry is one name Walk found.
type Entry struct {
	// Path is slash-separated and relative to the walk's root.
	Path string
	// Info is the entry's lstat: a symlink is reported as a symlink.
	// It is nil when Err is set by a failed lstat.
	Info fs.FileInfo
	// Err is set when the entry could not be lstat'd, or is a directory
	// that could not be opened, or whose names could not be read (fn is
	// then called a second time for it, as fs.WalkDir does).
	Err error

	dir  *os.Root // the directory holding the entry
	name string   // its name in dir
	sub  *os.Root // the entry, a directory, while fn and the walk use it
}

// Open opens the entry, a regular file by its lstat, without blocking. It
// fails with ErrNotRegular for anything else and with ErrChanged if the
// file opened is not the one Walk found.
func (e *Entry) Open() (*os.File, fs.FileInfo, error) {
	if e.Info == nil || !e.Info.Mode().IsRegular() {
		return nil, nil, notRegular(e.Path, e.mode())
	}
	f, info, err := Open(e.dir, e.name)
	if err != nil {
		return nil, nil, err
	}
	if !os.SameFile(info, e.Info) {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: e.Path, Err: ErrChanged}
	}
	return f, info, nil
}

// ReadFile reads the entry (see Open): at most max bytes, and an error
// wrapping ErrTooLarge if it holds more.
func (e *Entry) ReadFile(max int64) ([]byte, error) {
	f, info, err := e.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, info, e.Path, max)
}

// ReadChild reads the file name in the directory e, during fn's call for
// e (see ReadRegular).
func (e *Entry) ReadChild(name string, max int64) ([]byte, error) {
	if e.sub == nil {
		return nil, &fs.PathError{Op: "open", Path: e.Path + "/" + name, Err: errors.New("not in an open directory")}
	}
	return ReadRegular(e.sub, name, max)
}

// Readlink returns the text of the entry, a symlink, without following it.
func (e *Entry) Readlink() (string, error) {
	return e.dir.Readlink(e.name)
}

func (e *Entry) mode() fs.FileMode {
	if e.Info == nil {
		return fs.ModeIrregular
	}
	return e.Info.Mode()
}

// Walk calls fn for every entry under root, depth first, names in lexical
// order, a directory (opened, so that fn can ReadChild) before its
// contents; never for root itself. It never follows a symlink: a
// directory is entered only if what it opens is the directory lstat
// found. fn returning fs.SkipDir skips a
// directory's contents (or, for a file, the rest of its directory);
// fs.SkipAll ends the walk; any other error ends it and is returned, as
// is ctx's. A directory deeper than MaxDepth or with more than
// MaxDirNames names is reported as unreadable.
func Walk(ctx context.Context, root *os.Root, fn func(*Entry) error) error {
	names, err := list(root)
	if err != nil {
		return err
	}
	err = walk(ctx, root, "", names, 1, fn)
	if err == fs.SkipAll {
		return nil
	}
	return err
}

func walk(ctx context.Context, dir *os.Root, prefix string, names []string, depth int, fn func(*Entry) error) error {
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := &Entry{Path: name, dir: dir, name: name}
		if prefix != "" {
			e.Path = prefix + "/" + name
		}
		e.Info, e.Err = dir.Lstat(name)
		if errors.Is(e.Err, fs.ErrNotExist) {
			continue // removed since listed
		}
		isDir := e.Err == nil && e.Info.IsDir()
		if isDir {
			e.sub, e.Err = openDir(e, depth)
		}
		err := fn(e)
		if err == nil && e.sub != nil {
			var names []string
			if names, err = list(e.sub); err != nil {
				e.Err = err
				err = fn(e)
			} else {
				err = walk(ctx, e.sub, e.Path, names, depth+1, fn)
			}
		}
		if e.sub != nil {
			e.sub.Close()
			e.sub = nil
		}
		switch {
		case err == fs.SkipDir && isDir:
		case err == fs.SkipDir:
			return nil
		case err != nil:
			return err
		}
	}
	return nil
}

// openDir opens the directory e, which must be the one lstat found.
func openDir(e *Entry, depth int) (*os.Root, error) {
	if depth >= MaxDepth {
		return nil, &fs.PathError{Op: "open", Path: e.Path, Err: fmt.Errorf("more than %d directories deep", MaxDepth)}
	}
	sub, err := e.dir.OpenRoot(e.name)
	if err != nil {
		return nil, err
	}
	info, err := sub.Stat(".")
	if err == nil && !os.SameFile(info, e.Info) {
		err = &fs.PathError{Op: "open", Path: e.Path, Err: ErrChanged}
	}
	if err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// list returns the names in dir, sorted.
func list(dir *os.Root) ([]string, error) {
	return ReadDirNames(dir, ".", MaxDirNames)
}

// ReadDirNames returns the names in the directory name inside root,
// sorted, and an error if there are more than max. Like Open, the open
// does not block (a FIFO put in a directory's place opens at once) and
// what it opened must be a directory.
func ReadDirNames(root *os.Root, name string, max int) ([]string, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not a directory (%s)", Kind(info.Mode()))}
	}
	var names []string
	for {
		batch, err := f.Readdirnames(4096)
		names = append(names, batch...)
		if len(names) > max {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: fmt.Errorf("more than %d names", max)}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(names)
	return names, nil
}
