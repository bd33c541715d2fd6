package loop

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// A Snapshot taken inside a sandbox (sbx __progress snapshot, see
// SandboxProgress) travels to the host as text:
//
//	sbx-snapshot 1 N\n
//	HEAD\n                     "" outside git, else 40 or 64 hex digits
//	TREE\n                     64 hex digits
//	N times: PATH \0 FINGERPRINT \n
//
// A path holds no NUL (no file name can), a fingerprint neither NUL nor
// newline, so each record ends unambiguously; the count up front tells a
// whole answer from a cut one. The answer was made where the agent runs,
// so DecodeSnapshot reads it as hostile input: bounded in bytes, entries
// and field lengths, strictly shaped, and nothing of it ever leaves the
// Snapshot but Same and Changed's count.
const snapshotMagic = "sbx-snapshot 1 "

// snapshotLimits bound an encoded snapshot read by the host.
type snapshotLimits struct {
	bytes   int64 // the whole answer
	entries int   // its paths
}

// Bounds on an encoded snapshot.
const (
	// maxEncodedSnapshot bounds DecodeSnapshot's read: bytes for about
	// MaxEntries paths of average length with their fingerprints.
	maxEncodedSnapshot = 128 << 20
	// maxSnapshotPath bounds one path: untrusted.Walk goes MaxDepth
	// directories deep, each name at most 255 bytes.
	maxSnapshotPath = 1 << 17
	// maxFingerprint bounds one fingerprint ("exec stat " and five
	// numbers is the longest the Scanner makes).
	maxFingerprint = 256
)

// errSnapshotTooLarge is the cause of an encoded snapshot over its bounds.
var errSnapshotTooLarge = errors.New("over the limit")

// Encode writes s in the form DecodeSnapshot reads, paths sorted.
func (s Snapshot) Encode(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s%d\n%s\n%s\n", snapshotMagic, len(s.paths), s.Head, s.Tree)
	paths := make([]string, 0, len(s.paths))
	for p := range s.paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		bw.WriteString(p)
		bw.WriteByte(0)
		bw.WriteString(s.paths[p])
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// DecodeSnapshot reads a snapshot Encode wrote, from the agent's side: at
// most 128 MiB and MaxEntries paths, each field bounded and well formed,
// the whole answer and nothing after it; anything else is an error
// (errSnapshotTooLarge for the bounds) once it is seen, without reading
// further.
func DecodeSnapshot(r io.Reader) (Snapshot, error) {
	return decodeSnapshot(r, snapshotLimits{bytes: maxEncodedSnapshot, entries: MaxEntries})
}

func decodeSnapshot(r io.Reader, lim snapshotLimits) (Snapshot, error) {
	br := bufio.NewReaderSize(&boundedReader{r: r, max: lim.bytes, left: lim.bytes}, 64<<10)
	header, err := readField(br, '\n', len(snapshotMagic)+20)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot header: %w", err)
	}
	count, ok := bytes.CutPrefix(header, []byte(snapshotMagic))
	n, err := strconv.Atoi(string(count))
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != string(count) {
		return Snapshot{}, fmt.Errorf("not a snapshot: header %s", quoteStart(header))
	}
	if n > lim.entries {
		return Snapshot{}, fmt.Errorf("snapshot of %d paths, more than %d: %w", n, lim.entries, errSnapshotTooLarge)
	}
	var s Snapshot
	head, err := readField(br, '\n', 64)
	if err != nil || !isHash(head, true) {
		return Snapshot{}, fmt.Errorf("snapshot HEAD: %s", badField(head, err))
	}
	tree, err := readField(br, '\n', 64)
	if err != nil || len(tree) != 64 || !isHash(tree, false) {
		return Snapshot{}, fmt.Errorf("snapshot tree: %s", badField(tree, err))
	}
	s.Head, s.Tree = string(head), string(tree)
	// Sized as the entries arrive, not by what the header claims.
	s.paths = map[string]string{}
	for i := range n {
		p, err := readField(br, 0, maxSnapshotPath)
		if err != nil {
			return Snapshot{}, fmt.Errorf("snapshot path %d of %d: %w", i+1, n, err)
		}
		if len(p) == 0 {
			return Snapshot{}, fmt.Errorf("snapshot path %d of %d: empty", i+1, n)
		}
		fp, err := readField(br, '\n', maxFingerprint)
		if err != nil || len(fp) == 0 || bytes.IndexByte(fp, 0) >= 0 {
			return Snapshot{}, fmt.Errorf("snapshot fingerprint %d of %d: %s", i+1, n, badField(fp, err))
		}
		if _, dup := s.paths[string(p)]; dup {
			return Snapshot{}, fmt.Errorf("snapshot path %d of %d: listed twice", i+1, n)
		}
		s.paths[string(p)] = string(fp)
	}
	switch _, err := br.ReadByte(); {
	case err == nil:
		return Snapshot{}, fmt.Errorf("snapshot: more after its %d paths", n)
	case err != io.EOF:
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return s, nil
}

// readField reads up to delim, which it drops, and fails when more than
// max bytes come before it or the stream ends first.
func readField(br *bufio.Reader, delim byte, max int) ([]byte, error) {
	var field []byte
	for {
		chunk, err := br.ReadSlice(delim)
		if len(field)+len(chunk) > max+1 {
			return nil, fmt.Errorf("a field longer than %d bytes: %w", max, errSnapshotTooLarge)
		}
		field = append(field, chunk...)
		switch {
		case err == nil:
			return field[:len(field)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// boundedReader reads at most max bytes of r, then fails.
type boundedReader struct {
	r         io.Reader
	max, left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte tells a stream that ends here from a longer one.
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("more than %d bytes: %w", b.max, errSnapshotTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// isHash reports whether b is lower-case hex of a SHA-1 or SHA-256 (or
// empty, when empty is allowed).
func isHash(b []byte, empty bool) bool {
	if len(b) == 0 {
		return empty
	}
	if len(b) != 40 && len(b) != 64 {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// badField says what is wrong with a field read from the agent's side,
// quoting at most its start.
func badField(b []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	return "malformed: " + quoteStart(b)
}

func quoteStart(b []byte) string {
	if len(b) > 40 {
		return strconv.QuoteToGraphic(string(b[:40])) + "…"
	}
	return strconv.QuoteToGraphic(string(b))
}
