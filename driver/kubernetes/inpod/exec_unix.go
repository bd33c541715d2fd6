//go:build unix

package inpod

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/pflag"
)

// Exec is __k8s-exec [--save-header FILE | --header-file FILE] -- ARGV.
// Without a flag it reads the header line from stdin and replaces itself
// with ARGV in the header's environment and directory; the rest of stdin
// is ARGV's. A TTY exec cannot carry a header on its stdin (the terminal
// would echo it), so it comes in two: --save-header stores the header
// (0600) and exits, --header-file reads and removes it, then execs.
func Exec(_ context.Context, args []string, stdin io.Reader, _, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __k8s-exec", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	save := fs.String("save-header", "", "store the header from stdin in this file and exit")
	from := fs.String("header-file", "", "read the header from this file (removed once read)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sbx __k8s-exec: %v\n", err)
		return 126
	}
	if *save != "" {
		h, err := readHeader(stdin)
		if err != nil {
			return fail(err)
		}
		b, _ := json.Marshal(h)
		f, err := os.OpenFile(*save, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fail(err)
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(*save)
			return fail(err)
		}
		return 0
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "usage: sbx __k8s-exec [--header-file FILE] -- COMMAND [ARG...]")
		return 2
	}
	var h Header
	if *from != "" {
		b, err := os.ReadFile(*from)
		os.Remove(*from)
		if err != nil {
			return fail(err)
		}
		if len(b) > MaxHeader {
			return fail(fmt.Errorf("exec header over %d bytes", MaxHeader))
		}
		if err := json.Unmarshal(b, &h); err != nil {
			return fail(fmt.Errorf("exec header: %v", err))
		}
	} else {
		var err error
		if h, err = readHeader(stdin); err != nil {
			return fail(err)
		}
	}
	for k, v := range h.Env {
		if err := os.Setenv(k, v); err != nil {
			return fail(fmt.Errorf("env %s: %v", k, err))
		}
	}
	if h.Workdir != "" {
		if err := os.Chdir(h.Workdir); err != nil {
			return fail(err)
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "sbx __k8s-exec: %v\n", err)
		return 127
	}
	err = syscall.Exec(path, argv, os.Environ())
	return fail(err)
}
