package fakecli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// DefaultNow is the fakes' clock when $FAKE_NOW is unset: the release day
// of sbx v0.53.0 ("11 Nov", docker-sandboxes-cli.md §0), at noon UTC.
var DefaultNow = time.Date(2026, 11, 11, 12, 0, 0, 0, time.UTC)

// Now returns $FAKE_NOW (RFC 3339) or DefaultNow.
func Now(getenv func(string) string) (time.Time, error) {
	v := getenv("FAKE_NOW")
	if v == "" {
		return DefaultNow, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("FAKE_NOW: %w", err)
	}
	return t.UTC(), nil
}

// LogArgv appends args as one JSON array line to the file at path. An empty
// path logs nothing.
func LogArgv(path string, args []string) error {
	if path == "" {
		return nil
	}
	if args == nil {
		args = []string{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// FailRule is one entry of $FAKE_SBX_FAIL / $FAKE_DOCKER_FAIL: fail every
// call of Verb (N == 0) or only its Nth call (counting from 1).
type FailRule struct {
	Verb string
	N    int
}

// ParseFail parses "VERB[:N],VERB[:N]...". A VERB is a command path, words
// separated by spaces ("create", "policy allow", "network proxy").
func ParseFail(spec string) ([]FailRule, error) {
	var rules []FailRule
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		verb, n, found := strings.Cut(part, ":")
		r := FailRule{Verb: strings.Join(strings.Fields(verb), " ")}
		if found {
			i, err := strconv.Atoi(n)
			if err != nil || i < 1 {
				return nil, fmt.Errorf("bad failure rule %q: N must be a positive integer", part)
			}
			r.N = i
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// CountCall increments the call counter of every prefix of path ("policy",
// "policy allow", "policy allow network") and reports whether one of rules
// asks this call to fail.
func CountCall(st *fakestate.State, path []string, rules []FailRule) bool {
	fail := false
	for i := 1; i <= len(path); i++ {
		key := strings.Join(path[:i], " ")
		st.Calls[key]++
		for _, r := range rules {
			if r.Verb == key && (r.N == 0 || r.N == st.Calls[key]) {
				fail = true
			}
		}
	}
	return fail
}

// Version is a parsed "MAJOR.MINOR.PATCH" (a leading "v" is ignored).
type Version [3]int

// ParseVersion parses s; missing parts are zero.
func ParseVersion(s string) (Version, error) {
	var v Version
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if s == "" {
		return v, fmt.Errorf("empty version")
	}
	core, _, _ := strings.Cut(s, "-")
	for i, p := range strings.SplitN(core, ".", 3) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("bad version %q", s)
		}
		v[i] = n
	}
	return v, nil
}

// AtLeast reports whether v >= the version spelled w (which must parse).
func (v Version) AtLeast(w string) bool {
	o, err := ParseVersion(w)
	if err != nil {
		panic(err)
	}
	for i := range v {
		if v[i] != o[i] {
			return v[i] > o[i]
		}
	}
	return true
}

// String is "MAJOR.MINOR.PATCH".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }
