package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
)

// What the Engine API's streams carry, for a container or exec without a
// TTY: frames of an 8-byte header — the stream (0 stdin, 1 stdout, 2
// stderr), three zero bytes, the payload's size as a big-endian uint32 —
// and the payload (Docker Engine API, ContainerAttach: "Stream format";
// the same for ContainerLogs and ExecStart).
const (
	streamStdout = 1
	streamStderr = 2
	// maxFrame bounds one frame sbx holds: the daemon writes a log entry
	// (at most 16 KiB: the json-file driver splits longer lines) or one
	// read of a process's output per frame.
	maxFrame = 1 << 20
)

// readFrame reads one frame's header and payload into buf; io.EOF at a
// frame boundary is the stream's end.
func readFrame(r io.Reader, buf []byte) (stream byte, payload []byte, err error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	switch {
	case hdr[0] > streamStderr || hdr[1]|hdr[2]|hdr[3] != 0:
		return 0, nil, fmt.Errorf("not a multiplexed stream: header % x", hdr)
	case n > maxFrame:
		return 0, nil, fmt.Errorf("a frame of %d bytes, more than the %d sbx reads", n, maxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	payload = buf[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, fmt.Errorf("frame cut short: %w", err)
	}
	return hdr[0], payload, nil
}

// maxLogLine bounds a log line sbx assembles; a longer one is skipped
// (the proxy's decision lines are a few hundred bytes).
const maxLogLine = 64 << 10

// logLines reads a container's log (GET /containers/{id}/logs, stdout and
// stderr) since a time when since is not zero, and calls line with each
// line, in order. since goes as seconds.nanoseconds, the form the docker
// CLI sends for `docker logs --since` and its manual documents. A stream
// is read as it comes: sbx holds one frame and one line of it at a time.
func (e *engine) logLines(ctx context.Context, container string, since time.Time, line func([]byte)) error {
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}}
	if !since.IsZero() {
		q.Set("since", fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()))
	}
	path := "/containers/" + url.PathEscape(container) + "/logs?" + q.Encode()
	what := "docker engine API GET " + path
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := e.http().Do(req)
	if err != nil {
		e.run.TraceRequest(what, 0, time.Since(start), "", err)
		return fmt.Errorf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		err := refusal(what, resp.StatusCode, data)
		e.run.TraceRequest(what, resp.StatusCode, time.Since(start), string(data), err)
		return err
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var pending [3][]byte // per stream: a line not yet ended
	var buf []byte
	lines := 0
	emit := func(l []byte) {
		lines++
		line(l)
	}
	for {
		stream, payload, err := readFrame(br, buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			err = fmt.Errorf("%s: %v", what, err)
			e.run.TraceRequest(what, resp.StatusCode, time.Since(start), "", err)
			return err
		}
		buf = payload[:0]
		p := append(pending[stream], payload...)
		for {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				break
			}
			emit(p[:i])
			p = p[i+1:]
		}
		if len(p) > maxLogLine {
			p = p[:0]
		}
		pending[stream] = append(pending[stream][:0], p...)
	}
	for _, p := range pending {
		if len(p) > 0 {
			emit(p)
		}
	}
	e.run.TraceRequest(what, resp.StatusCode, time.Since(start), fmt.Sprintf("(%d lines)", lines), nil)
	return nil
}

// execConfig is the body of POST /containers/{id}/exec (Docker Engine
// API, ContainerExec): the fields `docker exec -i -w DIR -e NAME` sets.
type execConfig struct {
	AttachStdin  bool
	AttachStdout bool
	AttachStderr bool
	Tty          bool
	User         string   `json:",omitempty"`
	Env          []string `json:",omitempty"`
	WorkingDir   string   `json:",omitempty"`
	Cmd          []string
}

// exec runs argv in a running container as `docker exec` without -t
// does, through the API and without a CLI process: it creates the exec
// instance (POST /containers/{id}/exec), starts it on a connection taken
// over for the stream (POST /exec/{id}/start with Upgrade: tcp, as the
// CLI does), which carries stdin to the process and its stdout and stderr
// back in frames, and reads its exit code once the stream ends (GET
// /exec/{id}/json). Env values travel in the request body, over the
// daemon's socket, as the CLI sends them for -e NAME: never in an argv.
// Cancelling ctx drops the connection; the process, as with the CLI, is
// the caller's to end.
func (e *engine) exec(ctx context.Context, container string, argv []string, o driver.ExecOptions) (int, error) {
	cfg := execConfig{AttachStdin: o.Interactive && o.Stdin != nil, AttachStdout: true, AttachStderr: true, User: o.User, WorkingDir: o.Workdir, Cmd: argv}
	for _, k := range cliutil.SortedKeys(o.Env) {
		cfg.Env = append(cfg.Env, k+"="+o.Env[k])
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return -1, err
	}
	data, err := e.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(container)+"/exec", nil, bytes.NewReader(body), "application/json")
	if err != nil {
		return -1, err
	}
	var created struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(data, &created); err != nil || created.ID == "" {
		return -1, fmt.Errorf("docker engine API: creating an exec in %s: unexpected answer %q", container, data)
	}
	if err := e.execStream(ctx, created.ID, cfg.AttachStdin, o); err != nil {
		return -1, err
	}
	return e.execExitCode(ctx, created.ID)
}

// execStream starts an exec instance and relays its stream until the
// process's output ends.
func (e *engine) execStream(ctx context.Context, id string, stdin bool, o driver.ExecOptions) error {
	path := "/exec/" + url.PathEscape(id) + "/start"
	what := "docker engine API POST " + path
	start := time.Now()
	conn, err := e.dial(ctx)
	if err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	fail := func(status int, err error) error {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		err = fmt.Errorf("%s: %w", what, err)
		e.run.TraceRequest(what, status, time.Since(start), "", err)
		return err
	}
	req, err := http.NewRequest(http.MethodPost, "http://docker"+path, strings.NewReader(`{"Detach":false,"Tty":false}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		return fail(0, err)
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(0, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		err := refusal(what, resp.StatusCode, data)
		e.run.TraceRequest(what, resp.StatusCode, time.Since(start), "", err)
		return err
	}
	if stdin {
		go func() {
			io.Copy(conn, o.Stdin)
			closeWrite(conn)
		}()
	} else {
		closeWrite(conn)
	}
	out := [3]io.Writer{nil, writerOr(o.Stdout), writerOr(o.Stderr)}
	var buf []byte
	for {
		stream, payload, err := readFrame(br, buf)
		if errors.Is(err, io.EOF) && ctx.Err() == nil {
			break
		}
		if err != nil {
			return fail(resp.StatusCode, err)
		}
		buf = payload[:0]
		if stream == 0 {
			stream = streamStdout
		}
		if _, err := out[stream].Write(payload); err != nil {
			return fail(resp.StatusCode, err)
		}
	}
	e.run.TraceRequest(what, resp.StatusCode, time.Since(start), "", nil)
	return nil
}

// execExitCode reads a finished exec's exit code (GET /exec/{id}/json,
// ExecInspect). The stream ends when the process's output does; its
// exit is recorded a moment later at most, so a still-running exec is
// asked again, briefly.
func (e *engine) execExitCode(ctx context.Context, id string) (int, error) {
	deadline := time.Now().Add(5 * time.Second)
	for wait := time.Millisecond; ; wait *= 2 {
		data, err := e.do(ctx, http.MethodGet, "/exec/"+url.PathEscape(id)+"/json", nil, nil, "")
		if err != nil {
			return -1, err
		}
		var in struct {
			Running  bool
			ExitCode *int
		}
		if err := json.Unmarshal(data, &in); err != nil || in.ExitCode == nil && !in.Running {
			return -1, fmt.Errorf("docker engine API: inspecting exec %s: unexpected answer %q", id, data)
		}
		if !in.Running && in.ExitCode != nil {
			return *in.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("docker engine API: exec %s still running after its output ended", id)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// closeWrite ends what is sent on a connection, keeping what comes back.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
