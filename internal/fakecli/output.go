package fakecli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Table writes rows as space-aligned columns (three spaces between columns,
// which reproduces most column widths of the reference's examples), with
// trailing spaces trimmed.
func Table(w io.Writer, rows [][]string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// Noise is non-JSON text a real CLI sometimes prints around JSON on stdout
// (docker-sbx-evidence.md §1.1: daemon start lines before, an update banner
// after).
type Noise struct {
	Before, After []string
}

// JSON writes v indented by two spaces, as the captures' JSON is, wrapped
// in noise.
func JSON(w io.Writer, v any, noise Noise) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, l := range noise.Before {
		buf.WriteString(l + "\n")
	}
	buf.Write(b)
	buf.WriteByte('\n')
	for _, l := range noise.After {
		buf.WriteString(l + "\n")
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// Mutate changes the JSON document v that command path prints, as spec
// says, so tests can feed a driver shapes the real CLI has not (yet)
// printed. spec is a ";"-separated list of "COMMAND /POINTER=JSON" (set
// the value at the JSON pointer, RFC 6901 without escapes) or
// "COMMAND /POINTER" (delete it); COMMAND is the command path ("policy
// ls"). Entries for other commands are ignored.
func Mutate(v any, path []string, spec string) (any, error) {
	if strings.TrimSpace(spec) == "" {
		return v, nil
	}
	var doc any
	for _, entry := range strings.Split(spec, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i := strings.Index(entry, " /")
		if i < 0 {
			return nil, fmt.Errorf("fake: MUTATE %q: want COMMAND /POINTER[=JSON]", entry)
		}
		if strings.Join(strings.Fields(entry[:i]), " ") != strings.Join(path, " ") {
			continue
		}
		if doc == nil {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				return nil, err
			}
		}
		ptr, raw, set := strings.Cut(entry[i+1:], "=")
		var val any
		if set {
			dec := json.NewDecoder(strings.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&val); err != nil {
				return nil, fmt.Errorf("fake: MUTATE %q: %v", entry, err)
			}
		}
		var err error
		if doc, err = patch(doc, strings.Split(strings.TrimPrefix(ptr, "/"), "/"), val, set); err != nil {
			return nil, fmt.Errorf("fake: MUTATE %q: %v", entry, err)
		}
	}
	if doc == nil {
		return v, nil
	}
	return doc, nil
}

// patch sets (or deletes) the value at the pointer tokens under doc.
func patch(doc any, tokens []string, val any, set bool) (any, error) {
	tok := tokens[0]
	last := len(tokens) == 1
	switch d := doc.(type) {
	case map[string]any:
		if last {
			if set {
				d[tok] = val
			} else {
				delete(d, tok)
			}
			return d, nil
		}
		child, ok := d[tok]
		if !ok {
			return nil, fmt.Errorf("no key %q", tok)
		}
		nc, err := patch(child, tokens[1:], val, set)
		d[tok] = nc
		return d, err
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(d) {
			return nil, fmt.Errorf("no index %q in an array of %d", tok, len(d))
		}
		if last {
			if set {
				d[i] = val
				return d, nil
			}
			return append(d[:i], d[i+1:]...), nil
		}
		nc, err := patch(d[i], tokens[1:], val, set)
		d[i] = nc
		return d, err
	}
	return nil, fmt.Errorf("%q: not an object or array", tok)
}
