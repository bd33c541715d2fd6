package spec

import (
	"fmt"
	"strings"
)

// expansion is the result of interpolating one string.
type expansion struct {
	value string
	// sensitive is set when any part of value came from the host
	// environment (a default written in the file is not sensitive).
	sensitive bool
	// needed lists variables that must be set but are not (offline mode
	// only; otherwise they are errors).
	needed []string
	// vars lists every host variable the string refers to, set or not:
	// what it can carry from the host.
	vars []string
}

// interpolator expands Compose-style variables: ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?message}, ${VAR?message}, ${VAR:+alt},
// ${VAR+alt}, $VAR, and $$ for a literal dollar sign. Defaults may nest.
type interpolator struct {
	lookup  func(string) (string, bool)
	offline bool
	// seen is told every value the string takes from the host, so that
	// no message quotes it.
	seen func(HostValue)
}

func (ip *interpolator) expand(s string) (expansion, error) {
	var out expansion
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			b.WriteByte('$')
			i++
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i += 2
		case next == '{':
			end, err := closing(s, i+2)
			if err != nil {
				return out, err
			}
			e, err := ip.braced(s[i+2 : end])
			if err != nil {
				return out, err
			}
			b.WriteString(e.value)
			out.add(e)
			i = end + 1
		case isNameStart(next):
			j := i + 1
			for j < len(s) && isNameChar(s[j]) {
				j++
			}
			e, err := ip.variable(s[i+1:j], "", "")
			if err != nil {
				return out, err
			}
			b.WriteString(e.value)
			out.add(e)
			i = j
		default:
			b.WriteByte('$')
			i++
		}
	}
	out.value = b.String()
	return out, nil
}

// add merges what a part of the string brought.
func (e *expansion) add(part expansion) {
	e.sensitive = e.sensitive || part.sensitive
	e.needed = append(e.needed, part.needed...)
	e.vars = append(e.vars, part.vars...)
}

// closing finds the } that closes the ${ whose body starts at start.
func closing(s string, start int) (int, error) {
	depth := 0
	for j := start; j < len(s); j++ {
		switch {
		case s[j] == '$' && j+1 < len(s) && s[j+1] == '$':
			j++
		case s[j] == '$' && j+1 < len(s) && s[j+1] == '{':
			depth++
			j++
		case s[j] == '}':
			if depth == 0 {
				return j, nil
			}
			depth--
		}
	}
	return 0, fmt.Errorf("unterminated variable reference %q: missing }", s[start-2:])
}

var operators = []string{":-", ":?", ":+", "-", "?", "+"}

func (ip *interpolator) braced(body string) (expansion, error) {
	j := 0
	for j < len(body) && (isNameChar(body[j]) && (j > 0 || isNameStart(body[j]))) {
		j++
	}
	name, rest := body[:j], body[j:]
	if name == "" {
		return expansion{}, fmt.Errorf("invalid variable reference ${%s}: expected a variable name", body)
	}
	if rest == "" {
		return ip.variable(name, "", "")
	}
	for _, op := range operators {
		if strings.HasPrefix(rest, op) {
			return ip.variable(name, op, rest[len(op):])
		}
	}
	return expansion{}, fmt.Errorf("invalid variable reference ${%s}: expected }, :-, -, :?, ?, :+ or + after %q", body, name)
}

func (ip *interpolator) variable(name, op, word string) (expansion, error) {
	e, err := ip.lookupVariable(name, op, word)
	e.vars = append(e.vars, name)
	return e, err
}

func (ip *interpolator) lookupVariable(name, op, word string) (expansion, error) {
	val, set := ip.lookup(name)
	nonEmpty := set && val != ""
	fromEnv := expansion{value: val, sensitive: true}
	if nonEmpty && ip.seen != nil && ip.uses(op, set, nonEmpty) {
		ip.seen(HostValue{Var: name, Value: val})
	}
	switch op {
	case "":
		if set {
			return fromEnv, nil
		}
		if ip.offline {
			return expansion{needed: []string{name}}, nil
		}
		return expansion{}, fmt.Errorf("variable %q is not set (write ${%s:-default} to give a default)", name, name)
	case ":-", "-":
		if nonEmpty || (op == "-" && set) {
			return fromEnv, nil
		}
		return ip.expand(word)
	case ":?", "?":
		if nonEmpty || (op == "?" && set) {
			return fromEnv, nil
		}
		if ip.offline {
			return expansion{needed: []string{name}}, nil
		}
		msg, err := ip.expand(word)
		if err != nil {
			return expansion{}, err
		}
		if msg.value == "" {
			return expansion{}, fmt.Errorf("required variable %q is not set", name)
		}
		return expansion{}, fmt.Errorf("required variable %q is not set: %s", name, msg.value)
	default: // ":+", "+"
		if nonEmpty || (op == "+" && set) {
			return ip.expand(word)
		}
		return expansion{}, nil
	}
}

// uses reports whether a reference with operator op takes the variable's
// value (and not a default, a message or an alternative).
func (ip *interpolator) uses(op string, set, nonEmpty bool) bool {
	switch op {
	case "", "-", "?":
		return set
	case ":-", ":?":
		return nonEmpty
	}
	return false
}

func isNameStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isNameChar(c byte) bool {
	return isNameStart(c) || ('0' <= c && c <= '9')
}
