package gitdir

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/sbxhq/sbx/internal/untrusted"
)

const maxIndex = 256 << 20

// Tracked is the set of paths in the index: git reports changes to these
// even where an ignore rule matches them.
type Tracked struct {
	files map[string]bool
	dirs  map[string]bool
	info  fs.FileInfo // the index file's fstat, to tell it changed
}

// File reports whether path (slash-separated) is in the index.
func (t *Tracked) File(path string) bool { return t != nil && t.files[path] }

// Dir reports whether the directory path holds a path in the index.
func (t *Tracked) Dir(path string) bool { return t != nil && t.dirs[path] }

// Tracked reads the paths of .git/index, or returns prev when the index
// is the same file, of the same size and modification time, as when prev
// was read (git replaces the index by renaming a new file over it). A
// repository without an index tracks nothing. hashLen is the length of
// the repository's object names: 20, or 32 in a SHA-256 repository.
func (r *Repo) Tracked(prev *Tracked, hashLen int) (*Tracked, error) {
	f, info, err := untrusted.Open(r.dir, "index")
	if errors.Is(err, fs.ErrNotExist) {
		return &Tracked{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading index: %w", err)
	}
	defer f.Close()
	if prev != nil && prev.info != nil && os.SameFile(prev.info, info) &&
		prev.info.Size() == info.Size() && prev.info.ModTime().Equal(info.ModTime()) {
		return prev, nil
	}
	if info.Size() > maxIndex {
		return nil, fmt.Errorf("index: larger than %d bytes", maxIndex)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIndex))
	if err != nil {
		return nil, fmt.Errorf("reading index: %v", err)
	}
	t := &Tracked{files: map[string]bool{}, dirs: map[string]bool{}, info: info}
	shared, err := t.parse(data, hashLen)
	if err != nil {
		return nil, fmt.Errorf("index: %v", err)
	}
	if shared != "" {
		// A split index (core.splitIndex): the entries are those of
		// the shared index as amended by this one. The union is a
		// superset of the tracked paths, which only makes fewer paths
		// ignored.
		name := "sharedindex." + shared
		data, err := untrusted.ReadFile(r.dir, name, maxIndex)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if _, err := t.parse(data, hashLen); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	return t, nil
}

// parse adds the paths of an index file (gitformat-index(5)): a header
// "DIRC", version 2, 3 or 4 and entry count; entries of 40 bytes of stat
// data, the object name, 16 bits of flags (one selecting 16 more bits in
// version 3 and later), and the path: NUL-terminated and padded with NULs
// to a multiple of 8 bytes in versions 2 and 3, prefix-compressed in
// version 4 (a varint of bytes to drop from the previous path, then the
// NUL-terminated rest). Extensions follow; "link" names the shared index
// of a split index, whose name parse returns.
func (t *Tracked) parse(data []byte, hashLen int) (string, error) {
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return "", errors.New("not an index file")
	}
	version := binary.BigEndian.Uint32(data[4:])
	if version < 2 || version > 4 {
		return "", fmt.Errorf("version %d, not 2, 3 or 4", version)
	}
	count := int64(binary.BigEndian.Uint32(data[8:]))
	end := len(data) - hashLen // the trailing checksum
	if count > int64(end)/int64(40+hashLen+2) {
		return "", fmt.Errorf("%d entries in %d bytes", count, len(data))
	}
	pos := 12
	var prev []byte
	for range count {
		start := pos
		pos += 40 + hashLen
		if pos+2 > end {
			return "", errors.New("truncated entry")
		}
		flags := binary.BigEndian.Uint16(data[pos:])
		pos += 2
		if flags&0x4000 != 0 {
			if version < 3 {
				return "", errors.New("extended flags in a version 2 index")
			}
			pos += 2
		}
		var path []byte
		if version == 4 {
			drop, n := offsetVarint(data[min(pos, end):end])
			if n == 0 || drop > int64(len(prev)) {
				return "", errors.New("bad path prefix")
			}
			pos += n
			rest := data[min(pos, end):end]
			i := bytes.IndexByte(rest, 0)
			if i < 0 {
				return "", errors.New("unterminated path")
			}
			path = append(prev[:len(prev)-int(drop):len(prev)-int(drop)], rest[:i]...)
			pos += i + 1
		} else {
			rest := data[min(pos, end):end]
			i := bytes.IndexByte(rest, 0)
			if i < 0 {
				return "", errors.New("unterminated path")
			}
			path = rest[:i]
			pos += i + 1
			pos = start + (pos-start+7)&^7
		}
		prev = path
		t.add(string(path))
	}
	shared := ""
	for pos+8 <= end {
		sig := string(data[pos : pos+4])
		size := int(binary.BigEndian.Uint32(data[pos+4:]))
		pos += 8
		if size > end-pos {
			return "", fmt.Errorf("extension %q overruns the file", sig)
		}
		if sig == "link" && size >= hashLen {
			shared = hex.EncodeToString(data[pos : pos+hashLen])
			if strings.Trim(shared, "0") == "" {
				shared = ""
			}
		}
		pos += size
	}
	return shared, nil
}

func (t *Tracked) add(path string) {
	// A sparse index lists a directory outside the sparse checkout as
	// "DIR/"; it holds tracked files.
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		// A split index's entry that replaces a shared one has no name
		// of its own (gitformat-index(5), "Split index").
		return
	}
	t.files[path] = true
	for i := strings.LastIndexByte(path, '/'); i > 0; i = strings.LastIndexByte(path[:i], '/') {
		if t.dirs[path[:i]] {
			break
		}
		t.dirs[path[:i]] = true
	}
}

// offsetVarint decodes the varint of index version 4 path prefixes and
// pack OFS_DELTA offsets (varint.c): 7 bits per byte, big-endian, 1 added
// per continuation byte. It returns the value and the bytes it took, 0 if
// malformed.
func offsetVarint(b []byte) (int64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := int64(c & 0x7f)
	i := 1
	for c&0x80 != 0 {
		if i >= len(b) || v > 1<<48 {
			return 0, 0
		}
		c = b[i]
		i++
		v = (v+1)<<7 | int64(c&0x7f)
	}
	return v, i
}
