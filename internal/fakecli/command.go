package fakecli

import (
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// Resolve finds the command path at the front of args the way cobra does
// for the forms our drivers use: command words may be preceded or
// interleaved with global flags (globalBool take no value, globalValue take
// one), and walking stops at the first other flag, at "--", or at a word
// that does not extend a path in known. It returns the path and the
// remaining args (globals included) for the leaf's flag set.
func Resolve(args []string, known [][]string, globalBool, globalValue []string) (path, rest []string) {
	isIn := func(list []string, a string) bool {
		for _, x := range list {
			if a == x || strings.HasPrefix(a, x+"=") {
				return true
			}
		}
		return false
	}
	extends := func(p []string) bool {
		for _, k := range known {
			if len(k) >= len(p) && strings.Join(k[:len(p)], " ") == strings.Join(p, " ") {
				return true
			}
		}
		return false
	}
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			return path, append(rest, args[i:]...)
		case isIn(globalBool, a):
			rest = append(rest, a)
			i++
		case isIn(globalValue, a):
			rest = append(rest, a)
			if !strings.Contains(a, "=") && i+1 < len(args) {
				rest = append(rest, args[i+1])
				i++
			}
			i++
		case strings.HasPrefix(a, "-"):
			return path, append(rest, args[i:]...)
		case extends(append(append([]string(nil), path...), a)):
			path = append(path, a)
			i++
		default:
			return path, append(rest, args[i:]...)
		}
	}
	return path, rest
}

// Flags returns a silent, error-returning flag set (callers print errors in
// their CLI's style) that keeps flag definition order.
func Flags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}
