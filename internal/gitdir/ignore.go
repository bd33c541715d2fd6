package gitdir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// Bounds on ignore rules, which the agent writes.
const (
	MaxIgnoreFile = 1 << 20
	maxPattern    = 4096
	// maxMatchSteps bounds the work of matching one walk's paths
	// against its patterns (pattern bytes compared): wildmatch, git's
	// too, takes time exponential in the number of "**/" in a pattern.
	maxMatchSteps = 200_000_000
)

// Ignore decides which paths of a walk are ignored, as git does
// (gitignore(5)): the patterns of every .gitignore from the path's
// directory up to the top, deepest first, each file's last matching
// pattern deciding, then those of .git/info/exclude. The user's global
// excludes file (core.excludesFile) is not read, and matching is
// case-sensitive whatever core.ignoreCase says.
//
// The walk must be depth-first: Enter a directory before any path under
// it, and after every path outside the previous one.
type Ignore struct {
	stack   []rules
	exclude rules
	steps   int64
}

type rules struct {
	base     string // directory of the .gitignore, "" at the top
	patterns []pattern
}

type pattern struct {
	glob      []byte
	negative  bool // "!pattern" re-includes
	mustBeDir bool // "pattern/" matches only directories
	basename  bool // no slash but a trailing one: matched at any depth
}

// Exclude reads .git/info/exclude; it is empty when absent.
func (r *Repo) Exclude() ([]byte, error) {
	data, err := untrusted.ReadFile(r.dir, "info/exclude", MaxIgnoreFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading info/exclude: %w", err)
	}
	return data, nil
}

// SetExclude sets the patterns of .git/info/exclude.
func (ig *Ignore) SetExclude(data []byte) { ig.exclude = rules{patterns: parseIgnore(data)} }

// Enter makes the patterns of dir's .gitignore (dir slash-separated, ""
// at the top; data nil for none) apply to the paths under dir, and stops
// those of directories the walk has left from applying.
func (ig *Ignore) Enter(dir string, data []byte) {
	ig.leave(dir)
	if p := parseIgnore(data); len(p) > 0 {
		ig.stack = append(ig.stack, rules{base: dir, patterns: p})
	}
}

// leave pops the rules of directories that do not hold path.
func (ig *Ignore) leave(path string) {
	for len(ig.stack) > 0 && !under(path, ig.stack[len(ig.stack)-1].base) {
		ig.stack = ig.stack[:len(ig.stack)-1]
	}
}

func under(path, dir string) bool {
	return dir == "" || len(path) > len(dir) && path[len(dir)] == '/' && path[:len(dir)] == dir
}

// Match reports whether path (slash-separated, relative to the top) is
// ignored; isDir says whether it is a directory (a symlink is not).
func (ig *Ignore) Match(path string, isDir bool) (bool, error) {
	ig.leave(path)
	for i := len(ig.stack) - 1; i >= -1; i-- {
		rs := ig.exclude
		if i >= 0 {
			rs = ig.stack[i]
		}
		rel := path
		if rs.base != "" {
			rel = path[len(rs.base)+1:]
		}
		base := rel[strings.LastIndexByte(rel, '/')+1:]
		for j := len(rs.patterns) - 1; j >= 0; j-- {
			p := &rs.patterns[j]
			if p.mustBeDir && !isDir {
				continue
			}
			var m bool
			if p.basename {
				m = ig.wildmatch(p.glob, []byte(base), false)
			} else {
				m = ig.wildmatch(p.glob, []byte(rel), true)
			}
			if ig.steps > maxMatchSteps {
				return false, fmt.Errorf("ignore patterns: more than %d steps to match", maxMatchSteps)
			}
			if m {
				return !p.negative, nil
			}
		}
	}
	return false, nil
}

// parseIgnore reads a gitignore file as dir.c's add_patterns_from_buffer
// and parse_path_pattern do: an optional UTF-8 BOM; one pattern a line
// (CRLF or LF); "#" starts a comment; trailing spaces are dropped unless
// escaped with "\"; "!" negates; a trailing "/" matches directories only;
// a pattern with no other "/" matches a name at any depth, one with a "/"
// (a leading one is dropped) the path from the file's directory.
func parseIgnore(data []byte) []pattern {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []pattern
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		line = trimTrailingSpaces(line)
		var p pattern
		if len(line) > 0 && line[0] == '!' {
			p.negative = true
			line = line[1:]
		}
		if len(line) > 0 && line[len(line)-1] == '/' {
			p.mustBeDir = true
			line = line[:len(line)-1]
		}
		if len(line) == 0 || len(line) > maxPattern {
			continue
		}
		p.basename = bytes.IndexByte(line, '/') < 0
		p.glob = bytes.TrimPrefix(line, []byte("/"))
		out = append(out, p)
	}
	return out
}

// trimTrailingSpaces drops trailing spaces not escaped by a backslash
// (dir.c's trim_trailing_spaces).
func trimTrailingSpaces(b []byte) []byte {
	end := len(b)
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case ' ':
			if end == len(b) {
				end = i
			}
		case '\\':
			i++
			end = len(b)
		default:
			end = len(b)
		}
	}
	return b[:end]
}

// Results of dowild: no match, or no match possible for any later
// position of an enclosing "*" (to them all, or up to a "**").
const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

// wildmatch matches text against pattern as git's wildmatch.c does, with
// WM_PATHNAME when pathname is set ("*" and "?" do not match "/"; "**"
// between slashes matches any number of directories). Like dir.c, it
// compares a pattern without wildcards, or one "*" then none, directly.
func (ig *Ignore) wildmatch(pattern, text []byte, pathname bool) bool {
	ig.steps++
	switch {
	case !hasGlob(pattern):
		return bytes.Equal(pattern, text)
	case pattern[0] == '*' && !hasGlob(pattern[1:]) && (!pathname || bytes.IndexByte(text, '/') < 0):
		return bytes.HasSuffix(text, pattern[1:])
	}
	return ig.dowild(pattern, text, pathname) == wmMatch
}

func hasGlob(p []byte) bool {
	for _, c := range p {
		if isGlobSpecial(c) {
			return true
		}
	}
	return false
}

func (ig *Ignore) dowild(p, text []byte, pathname bool) int {
	at := func(b []byte, i int) byte { // C string semantics: 0 past the end
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		if ig.spent() {
			return wmAbortAll
		}
		pc := p[pi]
		tc := at(text, ti)
		if tc == 0 && pc != '*' {
			return wmAbortAll
		}
		switch pc {
		case '\\':
			pi++
			if at(p, pi) != tc {
				return wmNoMatch
			}
			continue
		default:
			if tc != pc {
				return wmNoMatch
			}
			continue
		case '?':
			if pathname && tc == '/' {
				return wmNoMatch
			}
			continue
		case '*':
			matchSlash := !pathname
			if pi++; at(p, pi) == '*' {
				prev := pi - 2
				for pi++; at(p, pi) == '*'; pi++ {
				}
				if pathname {
					if (prev < 0 || p[prev] == '/') &&
						(pi == len(p) || p[pi] == '/' || p[pi] == '\\' && at(p, pi+1) == '/') {
						if at(p, pi) == '/' && ig.dowild(p[pi+1:], text[ti:], pathname) == wmMatch {
							return wmMatch
						}
						matchSlash = true
					}
				} else {
					matchSlash = true
				}
			}
			if pi == len(p) {
				// A trailing "**" matches everything, a trailing "*"
				// what has no more slashes.
				if !matchSlash && bytes.IndexByte(text[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// One "*" then a slash matches up to the next slash.
				j := bytes.IndexByte(text[ti:], '/')
				if j < 0 {
					return wmNoMatch
				}
				ti += j
				continue // the slashes match in the loop
			}
			for {
				if tc == 0 {
					break
				}
				// Before a literal, skip to where it occurs: what
				// comes before belongs to the "*".
				if c := p[pi]; !isGlobSpecial(c) {
					for tc = at(text, ti); tc != 0 && (matchSlash || tc != '/'); tc = at(text, ti) {
						if ig.spent() {
							return wmAbortAll
						}
						if tc == c {
							break
						}
						ti++
					}
					if tc != c {
						return wmNoMatch
					}
				}
				if m := ig.dowild(p[pi:], text[ti:], pathname); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tc == '/' {
					return wmAbortToStarStar
				}
				ti++
				tc = at(text, ti)
			}
			return wmAbortAll
		case '[':
			m, next, ok := ig.class(p, pi, tc)
			if !ok {
				return wmAbortAll
			}
			pi = next
			if !m || pathname && tc == '/' {
				return wmNoMatch
			}
			continue
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

// spent counts a step and reports whether the bound is spent: every
// level of recursion then returns at its next step.
func (ig *Ignore) spent() bool {
	ig.steps++
	return ig.steps > maxMatchSteps
}

func isGlobSpecial(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

// class matches tc against the bracket expression at p[pi] ("[" ... "]",
// "!" or "^" negating, ranges, "\" escapes, [:name:] classes); it returns
// whether tc matches, the index of the closing "]", and false for a
// malformed expression.
func (ig *Ignore) class(p []byte, pi int, tc byte) (bool, int, bool) {
	at := func(i int) byte {
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	pi++
	pc := at(pi)
	negated := pc == '!' || pc == '^'
	if negated {
		pi++
		pc = at(pi)
	}
	var prev byte
	matched := false
	for {
		if pc == 0 || ig.spent() {
			return false, 0, false
		}
		switch {
		case pc == '\\':
			pi++
			if pc = at(pi); pc == 0 {
				return false, 0, false
			}
			if tc == pc {
				matched = true
			}
		case pc == '-' && prev != 0 && at(pi+1) != 0 && at(pi+1) != ']':
			pi++
			pc = at(pi)
			if pc == '\\' {
				pi++
				if pc = at(pi); pc == 0 {
					return false, 0, false
				}
			}
			if prev <= tc && tc <= pc {
				matched = true
			}
			pc = 0
		case pc == '[' && at(pi+1) == ':':
			s := pi + 2
			e := s
			for at(e) != 0 && at(e) != ']' {
				e++
			}
			if at(e) == 0 {
				return false, 0, false
			}
			if e-s-1 < 0 || p[e-1] != ':' {
				// No ":]": a plain "[".
				if tc == '[' {
					matched = true
				}
				pc = '['
				break
			}
			in, known := charClass(string(p[s:e-1]), tc)
			if !known {
				return false, 0, false
			}
			if in {
				matched = true
			}
			pi = e
			pc = 0
		default:
			if tc == pc {
				matched = true
			}
		}
		prev = pc
		pi++
		if pc = at(pi); pc == ']' {
			break
		}
	}
	return matched != negated, pi, true
}

// charClass reports whether c is in the POSIX class name, and whether
// the class is one wildmatch knows.
func charClass(name string, c byte) (bool, bool) {
	isUpper := 'A' <= c && c <= 'Z'
	isLower := 'a' <= c && c <= 'z'
	isDigit := '0' <= c && c <= '9'
	switch name {
	case "alnum":
		return isUpper || isLower || isDigit, true
	case "alpha":
		return isUpper || isLower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return isDigit, true
	case "graph":
		return 0x21 <= c && c <= 0x7e, true
	case "lower":
		return isLower, true
	case "print":
		return 0x20 <= c && c <= 0x7e, true
	case "punct":
		return 0x21 <= c && c <= 0x7e && !isUpper && !isLower && !isDigit, true
	case "space":
		return c == ' ' || '\t' <= c && c <= '\r', true
	case "upper":
		return isUpper, true
	case "xdigit":
		return isDigit || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F', true
	}
	return false, false
}
