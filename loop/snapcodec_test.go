package loop

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	testHead = "0123456789abcdef0123456789abcdef01234567"
	testTree = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// TestSnapshotRoundTrip: what Encode writes, DecodeSnapshot reads back as
// the same snapshot, whatever bytes the paths hold (a newline, invalid
// UTF-8, a terminal escape), so Same and Changed answer as they would on
// the snapshots themselves.
func TestSnapshotRoundTrip(t *testing.T) {
	before := Snapshot{Head: testHead, Tree: testTree, paths: map[string]string{
		"a.txt": "file 1", "dir/new\nline": "file 2", "bad\xff\xfe": "link 3", "\x1b[2Jclear": "exec 4",
	}}
	after := Snapshot{Head: "", Tree: strings.Repeat("f", 64), paths: map[string]string{
		"a.txt": "file 1", "dir/new\nline": "file 9", "added": "file 5",
	}}
	for _, s := range []Snapshot{before, after, {Tree: testTree, paths: map[string]string{}}} {
		var buf bytes.Buffer
		if err := s.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSnapshot(&buf)
		if err != nil {
			t.Fatalf("DecodeSnapshot(Encode(%v)): %v", s.paths, err)
		}
		if diff := cmp.Diff(s, got, cmp.AllowUnexported(Snapshot{})); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	if got := Changed(before, after); got != 4 {
		t.Errorf("Changed = %d, want 4 (1 modified, 1 added, 2 removed)", got)
	}
}

// record is one encoded path.
func record(path, fp string) string { return path + "\x00" + fp + "\n" }

// TestDecodeSnapshotHostile plays the agent answering in the measuring
// command's place: every answer that is not a whole, well-formed snapshot
// within bounds is an error, found without reading past what gives it
// away.
func TestDecodeSnapshotHostile(t *testing.T) {
	head := func(n int) string { return fmt.Sprintf("sbx-snapshot 1 %d\n%s\n%s\n", n, testHead, testTree) }
	lim := snapshotLimits{bytes: 4 << 10, entries: 10}
	tests := []struct {
		name   string
		answer string
		want   string // the error
	}{
		{"empty", "", "snapshot header: unexpected EOF"},
		{"not a snapshot", "hello\n", `not a snapshot: header "hello"`},
		{"an endless header", strings.Repeat("x", 1<<10), "snapshot header: a field longer than 35 bytes: over the limit"},
		{"a negative count", "sbx-snapshot 1 -1\n", `not a snapshot: header "sbx-snapshot 1 -1"`},
		{"a count with a sign", "sbx-snapshot 1 +1\n", `not a snapshot: header "sbx-snapshot 1 +1"`},
		{"more paths than allowed", head(11), "snapshot of 11 paths, more than 10: over the limit"},
		{"a HEAD that is no hash", "sbx-snapshot 1 0\n../../etc\n" + testTree + "\n", `snapshot HEAD: malformed: "../../etc"`},
		{"an upper-case HEAD", "sbx-snapshot 1 0\n" + strings.ToUpper(testHead) + "\n" + testTree + "\n", `snapshot HEAD: malformed: "0123456789ABCDEF0123456789ABCDEF01234567"`},
		{"a long HEAD", "sbx-snapshot 1 0\n" + strings.Repeat("a", 200) + "\n", "snapshot HEAD: a field longer than 64 bytes: over the limit"},
		{"a short tree", "sbx-snapshot 1 0\n\n" + testHead + "\n", `snapshot tree: malformed: "0123456789abcdef0123456789abcdef01234567"`},
		{"fewer paths than said", head(2) + record("a", "file 1"), "snapshot path 2 of 2: unexpected EOF"},
		{"a path cut short", head(1) + "a", "snapshot path 1 of 1: unexpected EOF"},
		{"more after the paths", head(1) + record("a", "file 1") + record("b", "file 2"), "snapshot: more after its 1 paths"},
		{"an empty path", head(1) + record("", "file 1"), "snapshot path 1 of 1: empty"},
		{"a path twice", head(2) + record("a", "file 1") + record("a", "file 2"), "snapshot path 2 of 2: listed twice"},
		{"a path longer than any", head(1) + strings.Repeat("p", maxSnapshotPath+1) + "\x00", "snapshot path 1 of 1: a field longer than 131072 bytes: over the limit"},
		{"an empty fingerprint", head(1) + record("a", ""), `snapshot fingerprint 1 of 1: malformed: ""`},
		{"a fingerprint with a NUL", head(1) + "a\x00fi\x00le\n", `snapshot fingerprint 1 of 1: malformed: "fi\x00le"`},
		{"a long fingerprint", head(1) + "a\x00" + strings.Repeat("f", 300) + "\n", "snapshot fingerprint 1 of 1: a field longer than 256 bytes: over the limit"},
		{"more bytes than allowed", head(10) + record(strings.Repeat("p", 4<<10), "file 1"), "snapshot path 1 of 10: more than 4096 bytes: over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := lim
			if tt.name == "a path longer than any" {
				l.bytes = 1 << 20
			}
			_, err := decodeSnapshot(strings.NewReader(tt.answer), l)
			if err == nil {
				t.Fatalf("decoded %q", tt.answer)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// endless is an answer that never ends: a valid start, then path bytes
// forever. It counts what was read of it.
type endless struct {
	start []byte
	read  int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := copy(p, e.start)
	e.start = e.start[n:]
	for i := n; i < len(p); i++ {
		p[i] = 'p'
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestDecodeSnapshotStopsReading: an answer without end is refused within
// DecodeSnapshot's own bounds, not read to its end.
func TestDecodeSnapshotStopsReading(t *testing.T) {
	e := &endless{start: []byte(fmt.Sprintf("sbx-snapshot 1 %d\n%s\n%s\n", MaxEntries, testHead, testTree))}
	if _, err := DecodeSnapshot(e); !errors.Is(err, errSnapshotTooLarge) {
		t.Errorf("an endless path: %v, want over the limit", err)
	}
	if e.read > maxSnapshotPath+128<<10 {
		t.Errorf("read %d bytes of an endless path, more than its bound", e.read)
	}

}
