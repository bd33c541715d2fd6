// Command mockmodel serves sbx's mock model APIs (internal/mockmodel) on a
// TCP address, for the end-to-end tests that run the real agent CLIs in a
// sandbox. It is built static (CGO_ENABLED=0) to live alone in a FROM
// scratch image, and logs one JSON line per request to stdout.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sbxhq/sbx/internal/mockmodel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "mockmodel:", err)
		}
		os.Exit(2)
	}
}

// run serves until ctx is done. It reports the address it listens on as
// "mockmodel: listening on ADDR" on stderr, so a caller that asked for port
// 0 learns the port.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mockmodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":8080", "TCP address to serve on")
	promiseAt := fs.Int("promise-at", 2, "first loop iteration whose final answer holds the promise")
	promise := fs.String("promise", "COMPLETE", "text of the completion promise")
	delay := fs.Duration("delay", 20*time.Millisecond, "pause between streamed events")
	cert := fs.String("cert", "", "serve HTTPS with this certificate (PEM; -key its key) instead of HTTP")
	key := fs.String("key", "", "the key of -cert (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *promiseAt < 1 {
		return fmt.Errorf("-promise-at must be at least 1, got %d", *promiseAt)
	}
	h := mockmodel.New(mockmodel.Config{
		Script: mockmodel.Script{PromiseAt: *promiseAt, Promise: *promise},
		Delay:  *delay,
		Log:    stdout,
	})
	if (*cert == "") != (*key == "") {
		return errors.New("-cert and -key go together")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if *cert != "" {
		c, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{c}, NextProtos: []string{"http/1.1"}})
	}
	fmt.Fprintf(stderr, "mockmodel: listening on %s\n", ln.Addr())
	return serve(ctx, ln, h)
}

// serve runs h on ln until ctx is done, with the header bounds and
// timeouts a server facing a hostile client needs, then shuts down.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
