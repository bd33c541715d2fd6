package gitdir

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// Bounds on counting commits.
const (
	MaxCommits = 100_000 // commits visited by one Count
	maxShallow = 16 << 20
)

// Count returns the number of commits reachable from newHead and not from
// oldHead, as "git rev-list --count oldHead..newHead" does; with oldHead
// "" every ancestor of newHead (and newHead) counts. It walks the history
// newest first by committer date, marking what oldHead reaches, and stops
// once only commits oldHead reaches are left (with revision.c's slop of 5
// for clock skew), so a few new commits on a long history cost a few
// reads. Commits listed in .git/shallow have no parents here, as in git.
func (r *Repo) Count(ctx context.Context, oldHead, newHead string) (int, error) {
	if newHead == "" || oldHead == newHead {
		return 0, nil
	}
	if !isObjectName(newHead) || oldHead != "" && (!isObjectName(oldHead) || len(oldHead) != len(newHead)) {
		return 0, fmt.Errorf("counting commits from %q to %q: not object names of one kind", truncate(oldHead), truncate(newHead))
	}
	shallow, err := r.shallow()
	if err != nil {
		return 0, err
	}
	w := &walker{store: newStore(r.dir, len(newHead)/2), shallow: shallow, nodes: map[string]*node{}}
	defer w.store.close()
	if err := w.mark(newHead, interesting); err != nil {
		return 0, err
	}
	if oldHead != "" {
		if err := w.mark(oldHead, uninteresting); err != nil {
			return 0, err
		}
	}
	slop := 5
	for w.queue.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if w.stillInteresting() {
			slop = 5
		} else if slop--; slop == 0 {
			break
		}
		n := heap.Pop(&w.queue).(*node)
		for _, p := range n.parents {
			if err := w.mark(p, n.flags); err != nil {
				return 0, err
			}
		}
	}
	count := 0
	for _, n := range w.nodes {
		if n.flags == interesting {
			count++
		}
	}
	return count, nil
}

const (
	interesting   = 1 // reachable from the new head
	uninteresting = 2 // reachable from the old head
)

type node struct {
	id      string
	time    int64
	parents []string
	flags   int
}

type walker struct {
	store   *store
	shallow map[string]bool
	nodes   map[string]*node
	queue   byTime
}

// mark adds flags to the commit id and queues it when that changed them.
func (w *walker) mark(id string, flags int) error {
	n := w.nodes[id]
	if n == nil {
		if len(w.nodes) >= MaxCommits {
			return fmt.Errorf("more than %d commits to walk", MaxCommits)
		}
		c, err := w.commit(id)
		if err != nil {
			return err
		}
		n = c
		w.nodes[id] = n
	}
	if n.flags|flags == n.flags {
		return nil
	}
	n.flags |= flags
	heap.Push(&w.queue, n)
	return nil
}

// stillInteresting reports whether a queued commit is not known to be
// reachable from the old head.
func (w *walker) stillInteresting() bool {
	for _, n := range w.queue {
		if n.flags&uninteresting == 0 {
			return true
		}
	}
	return false
}

// commit reads a commit object's headers, the lines up to the first
// empty one: "tree", then "parent" lines, and "committer NAME <EMAIL>
// SECONDS ZONE" (as commit.c's parse_commit_buffer reads them). The
// content is not checked against its name: a forged object can lie about
// its parents, which the walk survives (flags only grow, so each commit
// is queued at most three times).
func (w *walker) commit(id string) (*node, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return nil, err
	}
	typ, data, err := w.store.read(raw)
	if err != nil {
		return nil, fmt.Errorf("reading commit %s: %w", id, err)
	}
	if typ != objCommit {
		return nil, fmt.Errorf("%s is not a commit", id)
	}
	headers, _, _ := bytes.Cut(data, []byte("\n\n"))
	n := &node{id: id}
	for i, line := range bytes.Split(headers, []byte("\n")) {
		key, value, _ := bytes.Cut(line, []byte(" "))
		switch {
		case i == 0 && string(key) != "tree":
			return nil, fmt.Errorf("commit %s: first line is not a tree", id)
		case string(key) == "parent":
			p := string(value)
			if !isObjectName(p) || len(p) != len(id) {
				return nil, fmt.Errorf("commit %s: bad parent %q", id, truncate(p))
			}
			if !w.shallow[id] {
				n.parents = append(n.parents, p)
			}
		case string(key) == "committer":
			// NAME <EMAIL> SECONDS ZONE: the seconds are the next to last
			// field, after the last '>'.
			if j := bytes.LastIndexByte(value, '>'); j >= 0 {
				f := bytes.Fields(value[j+1:])
				if len(f) >= 1 {
					n.time, _ = strconv.ParseInt(string(f[0]), 10, 64)
				}
			}
		}
	}
	return n, nil
}

// shallow reads .git/shallow: the object names of commits whose parents
// the repository does not have (gitrepository-layout(5)).
func (r *Repo) shallow() (map[string]bool, error) {
	data, err := untrusted.ReadFile(r.dir, "shallow", maxShallow)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading shallow: %w", err)
	}
	m := map[string]bool{}
	for _, line := range bytes.Fields(data) {
		m[string(line)] = true
	}
	return m, nil
}

// byTime is a max-heap of commits by committer date.
type byTime []*node

func (q byTime) Len() int           { return len(q) }
func (q byTime) Less(i, j int) bool { return q[i].time > q[j].time }
func (q byTime) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *byTime) Push(x any)        { *q = append(*q, x.(*node)) }
func (q *byTime) Pop() any {
	old := *q
	n := old[len(old)-1]
	*q = old[:len(old)-1]
	return n
}
