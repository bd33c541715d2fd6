package gitdir

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// Bounds on reading the object store, which the agent can fill with
// whatever it likes (a delta bomb, a cycle of REF_DELTAs, a pack index
// claiming billions of objects).
const (
	maxObject     = 16 << 20  // largest object, or delta, inflated
	maxInflated   = 512 << 20 // total inflated by one store
	maxDeltaDepth = 4096      // pack.depth is capped at 4095 (builtin/pack-objects.c)
	maxPacks      = 4096
	maxCached     = 32 << 20 // resolved packed objects kept for reuse
)

// Object types, as in a pack entry's header (gitformat-pack(5), "Object
// types").
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

var typeNames = map[string]int{"commit": objCommit, "tree": objTree, "blob": objBlob, "tag": objTag}

// errMissing is the cause of looking up an object the store does not have.
var errMissing = errors.New("object not found")

// store reads objects from .git/objects: loose (zlib, "TYPE SIZE\0DATA")
// and in packs with a version 2 index. Of the alternates
// (objects/info/alternates, gitrepository-layout(5)) only a relative one
// that stays inside the .git directory is followed, one level deep: that
// is how a docker sandbox's own git directory names the host's objects,
// bound read-only inside it (driver/docker/git.go). Any other names a
// directory outside the workspace, and is ignored.
type store struct {
	dir     *os.Root
	objects string // the object directory, relative to dir
	hashLen int
	alts    []*store
	altRead bool
	packs   []*pack
	listed  bool
	budget  int64
	cache   map[cacheKey][]byte
	cached  int
}

type cacheKey struct {
	p   *pack
	off int64
}

func newStore(dir *os.Root, hashLen int) *store {
	return &store{dir: dir, objects: "objects", hashLen: hashLen, budget: maxInflated, cache: map[cacheKey][]byte{}}
}

func (s *store) close() {
	for _, p := range s.packs {
		p.close()
	}
	for _, a := range s.alts {
		a.close()
	}
}

// maxAlternates bounds the alternates file and the stores it adds.
const (
	maxAlternatesFile = 4 << 10
	maxAlternates     = 4
)

// alternates opens, once, the object directories objects/info/alternates
// names that lie inside the .git directory (relative lines, resolved from
// the object directory as git does).
func (s *store) alternates() []*store {
	if s.altRead || s.objects != "objects" {
		return s.alts
	}
	s.altRead = true
	data, err := untrusted.ReadFile(s.dir, "objects/info/alternates", maxAlternatesFile)
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || path.IsAbs(line) || len(s.alts) == maxAlternates {
			continue
		}
		dir := path.Join("objects", line)
		if !filepath.IsLocal(dir) || dir == "objects" {
			continue
		}
		s.alts = append(s.alts, &store{dir: s.dir, objects: dir, hashLen: s.hashLen, budget: maxInflated, cache: map[cacheKey][]byte{}})
	}
	return s.alts
}

// read returns the type and content of the object named id (raw bytes).
func (s *store) read(id []byte) (int, []byte, error) {
	return s.readDepth(id, 0)
}

func (s *store) readDepth(id []byte, depth int) (int, []byte, error) {
	if len(id) != s.hashLen {
		return 0, nil, fmt.Errorf("object name %x: want %d bytes", id, s.hashLen)
	}
	typ, data, err := s.loose(id)
	if !errors.Is(err, fs.ErrNotExist) {
		return typ, data, err
	}
	if err := s.listPacks(); err != nil {
		return 0, nil, err
	}
	for _, p := range s.packs {
		off, ok, err := p.find(id)
		if err != nil {
			return 0, nil, err
		}
		if ok {
			return s.packed(p, off, depth)
		}
	}
	for _, a := range s.alternates() {
		typ, data, err := a.readDepth(id, depth)
		if !errors.Is(err, errMissing) {
			return typ, data, err
		}
	}
	return 0, nil, fmt.Errorf("%x: %w", id, errMissing)
}

// loose reads objects/XX/REST: a zlib stream of "TYPE SP SIZE NUL" and
// SIZE bytes (gitformat-loose(5)).
func (s *store) loose(id []byte) (int, []byte, error) {
	h := hex.EncodeToString(id)
	f, _, err := untrusted.Open(s.dir, s.objects+"/"+h[:2]+"/"+h[2:])
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	z, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return 0, nil, fmt.Errorf("loose object %s: %v", h, err)
	}
	br := bufio.NewReader(z)
	var header []byte
	for len(header) < 32 {
		c, err := br.ReadByte()
		if err != nil {
			return 0, nil, fmt.Errorf("loose object %s: %v", h, err)
		}
		if c == 0 {
			break
		}
		header = append(header, c)
	}
	name, size, ok := strings.Cut(string(header), " ")
	typ := typeNames[name]
	n, err := parseSize(size)
	if !ok || typ == 0 || err != nil {
		return 0, nil, fmt.Errorf("loose object %s: bad header %q", h, truncate(string(header)))
	}
	data, err := s.inflate(br, n)
	if err != nil {
		return 0, nil, fmt.Errorf("loose object %s: %v", h, err)
	}
	return typ, data, nil
}

func parseSize(s string) (int64, error) {
	var n int64
	if s == "" || len(s) > 18 {
		return 0, errors.New("bad size")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad size")
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// inflate reads exactly n bytes from r, within the object and store
// bounds.
func (s *store) inflate(r io.Reader, n int64) ([]byte, error) {
	if n > maxObject {
		return nil, fmt.Errorf("object of %d bytes, more than sbx reads (%d)", n, maxObject)
	}
	if s.budget -= n; s.budget < 0 {
		return nil, fmt.Errorf("more than %d bytes of objects inflated", maxInflated)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("inflating %d bytes: %v", n, err)
	}
	return data, nil
}

// listPacks opens every objects/pack/pack-*.idx with its .pack.
func (s *store) listPacks() error {
	if s.listed {
		return nil
	}
	s.listed = true
	names, err := untrusted.ReadDirNames(s.dir, s.objects+"/pack", 4*maxPacks)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		base, ok := strings.CutSuffix(name, ".idx")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		if len(s.packs) == maxPacks {
			return fmt.Errorf("more than %d packs in objects/pack", maxPacks)
		}
		p, err := openPack(s.dir, s.objects+"/pack/"+base, s.hashLen)
		if err != nil {
			return err
		}
		s.packs = append(s.packs, p)
	}
	return nil
}

// pack is a packfile with its version 2 index (gitformat-pack(5),
// "Version 2 pack-*.idx files"): magic, version, a 256-entry fan-out
// table, the sorted object names, their CRC32s, their 4-byte offsets (the
// high bit selecting an entry of the 8-byte offset table that follows),
// and two checksums.
type pack struct {
	name     string
	idx      *os.File
	data     *os.File
	dataSize int64
	hashLen  int
	n        int64
	large    int64
	fanout   [256]uint32
}

var idxMagic = []byte{0xff, 't', 'O', 'c'}

func openPack(dir *os.Root, base string, hashLen int) (*pack, error) {
	p := &pack{name: base, hashLen: hashLen}
	bad := func(format string, args ...any) (*pack, error) {
		p.close()
		return nil, fmt.Errorf("%s: %s", base, fmt.Sprintf(format, args...))
	}
	var idxInfo, dataInfo fs.FileInfo
	var err error
	if p.idx, idxInfo, err = untrusted.Open(dir, base+".idx"); err != nil {
		return bad("%v", err)
	}
	if p.data, dataInfo, err = untrusted.Open(dir, base+".pack"); err != nil {
		return bad("%v", err)
	}
	p.dataSize = dataInfo.Size()
	head := make([]byte, 8+256*4)
	if _, err := p.idx.ReadAt(head, 0); err != nil {
		return bad("index: %v", err)
	}
	if !bytes.Equal(head[:4], idxMagic) || binary.BigEndian.Uint32(head[4:]) != 2 {
		return bad("pack index is not version 2, the only version sbx reads")
	}
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(head[8+4*i:])
		if i > 0 && p.fanout[i] < p.fanout[i-1] {
			return bad("index: fan-out table is not sorted")
		}
	}
	p.n = int64(p.fanout[255])
	fixed := int64(8+256*4) + p.n*int64(hashLen+8) + 2*int64(hashLen)
	extra := idxInfo.Size() - fixed
	if extra < 0 || extra%8 != 0 {
		return bad("index: %d bytes for %d objects", idxInfo.Size(), p.n)
	}
	p.large = extra / 8
	pk := make([]byte, 12)
	if _, err := p.data.ReadAt(pk, 0); err != nil {
		return bad("pack: %v", err)
	}
	if v := binary.BigEndian.Uint32(pk[4:]); string(pk[:4]) != "PACK" || v != 2 && v != 3 {
		return bad("not a version 2 or 3 pack")
	}
	if int64(binary.BigEndian.Uint32(pk[8:])) != p.n {
		return bad("pack and index disagree on the number of objects")
	}
	return p, nil
}

func (p *pack) close() {
	if p.idx != nil {
		p.idx.Close()
	}
	if p.data != nil {
		p.data.Close()
	}
}

// find returns the offset in the pack of the object named id.
func (p *pack) find(id []byte) (int64, bool, error) {
	lo := int64(0)
	if id[0] > 0 {
		lo = int64(p.fanout[id[0]-1])
	}
	hi := int64(p.fanout[id[0]])
	names := int64(8 + 256*4)
	name := make([]byte, p.hashLen)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := p.idx.ReadAt(name, names+mid*int64(p.hashLen)); err != nil {
			return 0, false, fmt.Errorf("%s.idx: %v", p.name, err)
		}
		switch c := bytes.Compare(name, id); {
		case c == 0:
			off, err := p.offset(mid)
			return off, err == nil, err
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return 0, false, nil
}

// offset returns the pack offset of the i-th object of the index.
func (p *pack) offset(i int64) (int64, error) {
	small := int64(8+256*4) + p.n*int64(p.hashLen+4)
	b := make([]byte, 8)
	if _, err := p.idx.ReadAt(b[:4], small+4*i); err != nil {
		return 0, fmt.Errorf("%s.idx: %v", p.name, err)
	}
	off := int64(binary.BigEndian.Uint32(b))
	if off&0x80000000 != 0 {
		k := off & 0x7fffffff
		if k >= p.large {
			return 0, fmt.Errorf("%s.idx: large offset %d of %d", p.name, k, p.large)
		}
		if _, err := p.idx.ReadAt(b, small+4*p.n+8*k); err != nil {
			return 0, fmt.Errorf("%s.idx: %v", p.name, err)
		}
		off = int64(binary.BigEndian.Uint64(b))
	}
	if off < 12 || off >= p.dataSize {
		return 0, fmt.Errorf("%s.idx: offset %d outside the pack", p.name, off)
	}
	return off, nil
}

// entry is a pack entry's header: type and size (of the object, or of
// the delta), then for OFS_DELTA the base's offset, for REF_DELTA its
// name; data starts at the zlib stream.
type entry struct {
	typ     int
	size    int64
	baseOff int64
	baseID  []byte
	data    int64
}

// header parses the entry at off (gitformat-pack(5), "Object entries"):
// a size-and-type varint — 3 type bits, 4 size bits, then 7 size bits
// per byte while the high bit is set — and for OFS_DELTA the distance
// back to the base (offsetVarint).
func (p *pack) header(off int64) (entry, error) {
	b := make([]byte, 32+p.hashLen)
	n, err := p.data.ReadAt(b, off)
	if err != nil && err != io.EOF {
		return entry{}, err
	}
	b = b[:n]
	bad := fmt.Errorf("%s.pack: bad entry header at %d", p.name, off)
	i := 0
	next := func() (byte, bool) {
		if i >= len(b) {
			return 0, false
		}
		i++
		return b[i-1], true
	}
	c, ok := next()
	if !ok {
		return entry{}, bad
	}
	e := entry{typ: int(c>>4) & 7, size: int64(c & 15)}
	for shift := 4; c&0x80 != 0; shift += 7 {
		if c, ok = next(); !ok || shift > 56 {
			return entry{}, bad
		}
		e.size |= int64(c&0x7f) << shift
	}
	switch e.typ {
	case objOfsDelta:
		neg, n := offsetVarint(b[i:])
		e.baseOff = off - neg
		if n == 0 || neg <= 0 || e.baseOff < 12 {
			return entry{}, bad
		}
		i += n
	case objRefDelta:
		if len(b)-i < p.hashLen {
			return entry{}, bad
		}
		e.baseID = b[i : i+p.hashLen]
		i += p.hashLen
	case objCommit, objTree, objBlob, objTag:
	default:
		return entry{}, fmt.Errorf("%s.pack: entry of unknown type %d at %d", p.name, e.typ, off)
	}
	e.data = off + int64(i)
	return e, nil
}

// packed resolves the object at off, applying its chain of deltas.
func (s *store) packed(p *pack, off int64, depth int) (int, []byte, error) {
	start := off
	var deltas [][]byte
	var typ int
	var base []byte
	for {
		if depth++; depth > maxDeltaDepth {
			return 0, nil, fmt.Errorf("%s.pack: delta chain longer than %d", p.name, maxDeltaDepth)
		}
		if data, ok := s.cache[cacheKey{p, off}]; ok {
			typ, base = int(data[0]), data[1:]
			break
		}
		e, err := p.header(off)
		if err != nil {
			return 0, nil, err
		}
		z, err := zlib.NewReader(io.NewSectionReader(p.data, e.data, p.dataSize-e.data))
		if err != nil {
			return 0, nil, fmt.Errorf("%s.pack at %d: %v", p.name, off, err)
		}
		data, err := s.inflate(z, e.size)
		if err != nil {
			return 0, nil, fmt.Errorf("%s.pack at %d: %v", p.name, off, err)
		}
		switch e.typ {
		case objOfsDelta:
			deltas = append(deltas, data)
			off = e.baseOff
			continue
		case objRefDelta:
			deltas = append(deltas, data)
			if o, ok, err := p.find(e.baseID); err != nil {
				return 0, nil, err
			} else if ok {
				off = o
				continue
			}
			// A base outside this pack: only thin packs in transit have
			// one, but read it wherever it is.
			typ, base, err = s.readDepth(e.baseID, depth)
			if err != nil {
				return 0, nil, err
			}
		default:
			typ, base = e.typ, data
		}
		break
	}
	for i := len(deltas) - 1; i >= 0; i-- {
		var err error
		if base, err = s.patch(base, deltas[i]); err != nil {
			return 0, nil, fmt.Errorf("%s.pack at %d: %v", p.name, start, err)
		}
	}
	if s.cached+len(base) < maxCached {
		s.cached += len(base) + 1
		s.cache[cacheKey{p, start}] = append([]byte{byte(typ)}, base...)
	}
	return typ, base, nil
}

// patch applies a delta (gitformat-pack(5), "Deltified representation"):
// the base's size and the result's, little-endian base-128, then
// instructions: copy (high bit set; bits 0-3 select offset bytes, 4-6
// size bytes; size 0 means 0x10000) or insert (the next 1-127 bytes).
func (s *store) patch(base, delta []byte) ([]byte, error) {
	i := 0
	varint := func() (int64, error) {
		var v int64
		for shift := 0; ; shift += 7 {
			if i >= len(delta) || shift > 56 {
				return 0, errors.New("truncated delta")
			}
			c := delta[i]
			i++
			v |= int64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, nil
			}
		}
	}
	srcSize, err := varint()
	if err != nil {
		return nil, err
	}
	dstSize, err := varint()
	if err != nil {
		return nil, err
	}
	if srcSize != int64(len(base)) {
		return nil, fmt.Errorf("delta for a base of %d bytes applied to %d", srcSize, len(base))
	}
	if dstSize > maxObject {
		return nil, fmt.Errorf("object of %d bytes, more than sbx reads (%d)", dstSize, maxObject)
	}
	if s.budget -= dstSize; s.budget < 0 {
		return nil, fmt.Errorf("more than %d bytes of objects inflated", maxInflated)
	}
	out := make([]byte, 0, dstSize)
	for i < len(delta) {
		op := delta[i]
		i++
		switch {
		case op&0x80 != 0:
			var off, n int64
			for bit := range 7 {
				if op&(1<<bit) == 0 {
					continue
				}
				if i >= len(delta) {
					return nil, errors.New("truncated delta")
				}
				if bit < 4 {
					off |= int64(delta[i]) << (8 * bit)
				} else {
					n |= int64(delta[i]) << (8 * (bit - 4))
				}
				i++
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > int64(len(base)) || int64(len(out))+n > dstSize {
				return nil, errors.New("delta copies outside its base or result")
			}
			out = append(out, base[off:off+n]...)
		case op != 0:
			n := int(op)
			if i+n > len(delta) || int64(len(out)+n) > dstSize {
				return nil, errors.New("delta inserts outside its result")
			}
			out = append(out, delta[i:i+n]...)
			i += n
		default:
			return nil, errors.New("delta has the reserved instruction 0")
		}
	}
	if int64(len(out)) != dstSize {
		return nil, fmt.Errorf("delta made %d bytes, declared %d", len(out), dstSize)
	}
	return out, nil
}
