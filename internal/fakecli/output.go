package fakecli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
// (docker-sandboxes-cli.md §2.6, §8: daemon start lines, update notices).
type Noise struct {
	Before, After []string
}

// JSON writes v indented by two spaces, as the reference's JSON examples
// are, wrapped in noise.
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
