package runner

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Entry is one command of a transcript: an SBX_TRACE file or a `sbx
// doctor --probe` report.
type Entry struct {
	// Line is the line number of the entry's "$ " line.
	Line int
	Args []string
	// Stdout and Stderr are the output as recorded (with a trailing
	// newline when the output had lines).
	Stdout, Stderr string
	// Exit is the exit status (the HTTP status of an Engine API request).
	Exit int
	// Check is the probe's verdict on the output ("ok", "FAILED: ..."), ""
	// in a trace.
	Check string
}

// ReadTranscript parses the transcript format Runner writes: "$ ARGV"
// (shell-quoted), then "# stdout:" and "# stderr:" sections of "| " lines,
// "# exit N" (or "# status N"), optionally "# check: ..." and other "#"
// comments, which are ignored.
func ReadTranscript(r io.Reader) ([]Entry, error) {
	var out []Entry
	var cur *Entry
	var section *string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "$ "):
			args, err := Split(line[2:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			out = append(out, Entry{Line: n, Args: args})
			cur, section = &out[len(out)-1], nil
		case cur == nil:
			if !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("line %d: text before the first \"$ \" line", n)
			}
		case line == "# stdout:":
			section = &cur.Stdout
		case line == "# stderr:":
			section = &cur.Stderr
		case line == "|" || strings.HasPrefix(line, "| "):
			if section == nil {
				return nil, fmt.Errorf("line %d: output outside a # stdout: or # stderr: section", n)
			}
			*section += strings.TrimPrefix(strings.TrimPrefix(line, "|"), " ") + "\n"
		case strings.HasPrefix(line, "# exit "), strings.HasPrefix(line, "# status "):
			f := strings.Fields(line)
			code, err := strconv.Atoi(f[2])
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			cur.Exit, section = code, nil
		case strings.HasPrefix(line, "# check: "):
			cur.Check, section = strings.TrimPrefix(line, "# check: "), nil
		case strings.HasPrefix(line, "#"):
			section = nil
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", n, line)
		}
	}
	return out, sc.Err()
}

// Split is the inverse of Quote: it splits a command line into words,
// honouring single quotes and backslash escapes.
func Split(s string) ([]string, error) {
	var out []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == ' ':
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		out = append(out, w.String())
	}
	return out, nil
}
