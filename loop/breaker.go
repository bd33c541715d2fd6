package loop

import (
	"fmt"
	"regexp"
	"strings"
)

// Failure is the structured outcome of a failed iteration: the exit status
// and the normalised last error line. Two failures are the same when both
// are equal: never a substring match on words like "error".
type Failure struct {
	ExitStatus int    `json:"exit_status"`
	LastLine   string `json:"last_line"`
}

var (
	hexRun   = regexp.MustCompile(`\b(0x)?[0-9a-fA-F]{8,}\b`)
	number   = regexp.MustCompile(`\d+`)
	tempPath = regexp.MustCompile(`/tmp/[^\s:'"]+`)
)

// LastErrorLine is the last non-empty line of output, with what varies
// between identical failures (numbers, hashes, temporary paths, spacing)
// normalised away.
func LastErrorLine(output string) string {
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		l = tempPath.ReplaceAllString(l, "/tmp/…")
		l = hexRun.ReplaceAllStringFunc(l, func(m string) string {
			if strings.Trim(m, "0123456789") == "" {
				return "N" // a long decimal number, not a hash
			}
			return "#"
		})
		l = number.ReplaceAllString(l, "N")
		return normalize(l)
	}
	return ""
}

// Breaker counts iterations that went nowhere. NoProgress counts
// consecutive iterations that changed neither the working tree nor HEAD;
// SameError counts consecutive iterations with the same Failure.
type Breaker struct {
	NoProgressLimit int `json:"no_progress_limit"`
	SameErrorLimit  int `json:"same_error_limit"`

	NoProgress int      `json:"no_progress"`
	SameError  int      `json:"same_error"`
	last       *Failure // the previous iteration's failure, nil after a success
}

// Observe records one iteration and reports why the breaker trips, or "".
func (b *Breaker) Observe(progressed bool, failure *Failure) string {
	if progressed {
		b.NoProgress = 0
	} else {
		b.NoProgress++
	}
	switch {
	case failure == nil:
		b.SameError, b.last = 0, nil
	case b.last != nil && *b.last == *failure:
		b.SameError++
	default:
		b.SameError = 1
		f := *failure
		b.last = &f
	}
	if b.NoProgressLimit > 0 && b.NoProgress >= b.NoProgressLimit {
		return fmt.Sprintf("no progress in %d iterations in a row (neither the working tree nor HEAD changed)", b.NoProgress)
	}
	if b.SameErrorLimit > 0 && b.SameError >= b.SameErrorLimit {
		return fmt.Sprintf("the same failure %d times in a row: exit status %d, %q", b.SameError, failure.ExitStatus, failure.LastLine)
	}
	return ""
}
