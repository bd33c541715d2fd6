package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
)

// engine asks the Docker Engine API of the daemon the docker CLI uses for
// what creating, plan, an in-place change and removal need: creating,
// starting, inspecting, listing and removing containers, volumes and
// images, and talking to the egress proxy (its control channel, or its
// policy file and a signal for a proxy without one). A request takes
// about a millisecond, where a docker CLI process takes 10–50 and the
// daemon's archive endpoints (docker cp) 35; building, pulling (which
// needs the CLI's registry credentials), exec and logs stay with the CLI.
//
// Paths carry no API version: the daemon answers them in its own current
// version, whose fields the driver reads have been stable since API 1.25.
type engine struct {
	run    *runner.Runner
	docker string // the CLI, for `docker system dial-stdio`

	once   sync.Once    // sets sock and client
	sock   string       // the daemon's socket, or "" to dial through the CLI
	client *http.Client // requests on kept-alive connections from dial
}

// defaultSocket is where the CLI finds the daemon when nothing says
// otherwise.
const defaultSocket = "/var/run/docker.sock"

// daemonSocket returns the daemon's Unix socket when the docker CLI would
// use one with no help (DOCKER_HOST=unix://…, or no DOCKER_HOST and no
// context chosen), else "": then the connection goes through `docker
// system dial-stdio`, which honours every CLI setting (contexts, tcp with
// TLS, ssh).
func daemonSocket(getenv func(string) string) string {
	if host := getenv("DOCKER_HOST"); host != "" {
		if p, ok := strings.CutPrefix(host, "unix://"); ok && p != "" {
			return p
		}
		return ""
	}
	name := getenv("DOCKER_CONTEXT")
	if name == "" {
		name = currentContext(getenv)
	}
	if name != "" && name != "default" {
		return ""
	}
	return defaultSocket
}

// currentContext is the context chosen by `docker context use`, from the
// CLI's config file.
func currentContext(getenv func(string) string) string {
	dir := getenv("DOCKER_CONFIG")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".docker")
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return ""
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	json.Unmarshal(data, &cfg)
	return cfg.CurrentContext
}

func (e *engine) setup() {
	e.once.Do(func() {
		e.sock = daemonSocket(e.run.Getenv)
		e.client = &http.Client{Transport: &http.Transport{
			DialContext:        func(ctx context.Context, _, _ string) (net.Conn, error) { return e.dial(ctx) },
			DisableCompression: true,
			MaxIdleConns:       2,
			IdleConnTimeout:    30 * time.Second,
		}}
	})
}

// dial opens a connection to the daemon.
func (e *engine) dial(ctx context.Context) (net.Conn, error) {
	e.setup()
	if e.sock != "" {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.sock)
	}
	return dialStdio(e.run, e.docker)
}

func (e *engine) http() *http.Client {
	e.setup()
	return e.client
}

// apiError is the daemon's answer to a request it refused.
type apiError struct {
	What    string
	Status  int
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.What, e.Message, e.Status)
}

// refusal is the *apiError for an answer with the given status and body
// (the daemon's JSON {"message": …}, or plain text).
func refusal(what string, status int, body []byte) error {
	var m struct{ Message string }
	if json.Unmarshal(body, &m); m.Message == "" {
		m.Message = strings.TrimSpace(string(body))
	}
	return &apiError{What: what, Status: status, Message: m.Message}
}

// notFound reports whether err is the daemon saying that what was asked
// for (a container, an image, a path in a container) does not exist.
func notFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// do sends one request and returns the answer's body; a status of 300 or
// more is an *apiError carrying the daemon's message.
func (e *engine) do(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string) ([]byte, error) {
	return e.send(ctx, method, path, query, body, contentType, "")
}

// doJSON sends v as the request's JSON body; the trace shows the body
// (sbx never sends a secret to the daemon), an error only the request.
func (e *engine) doJSON(ctx context.Context, method, path string, query url.Values, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return e.send(ctx, method, path, query, bytes.NewReader(data), "application/json", string(data))
}

// send is do, with the request body to show in the trace ("" for none).
func (e *engine) send(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType, shownBody string) ([]byte, error) {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	what := "docker engine API " + method + " " + path
	traced := what
	if shownBody != "" {
		traced += " " + runner.Quote([]string{shownBody})
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	start := time.Now()
	resp, err := e.http().Do(req)
	status := 0
	var data []byte
	if err == nil {
		status = resp.StatusCode
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	shown := string(data)
	if resp != nil && !strings.Contains(resp.Header.Get("Content-Type"), "json") && len(data) > 0 {
		shown = fmt.Sprintf("(%d bytes of %s)", len(data), resp.Header.Get("Content-Type"))
	}
	e.run.TraceRequest(traced, status, time.Since(start), shown, err)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%s: %v (is the Docker daemon running?)", what, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	if status >= 300 {
		return nil, refusal(what, status, data)
	}
	return data, nil
}

// inspectContainer returns a container's details; nil when there is no
// container of that name. (sbx's names start with "sbx-", so they can
// never be taken for an ID prefix.)
func (e *engine) inspectContainer(ctx context.Context, name string) (*inspect, error) {
	data, err := e.do(ctx, http.MethodGet, "/containers/"+url.PathEscape(name)+"/json", nil, nil, "")
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var in inspect
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("inspecting container %s: %v", name, err)
	}
	return &in, nil
}

// imageExists reports whether the daemon has an image.
func (e *engine) imageExists(ctx context.Context, ref string) (bool, error) {
	_, err := e.do(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, "")
	if notFound(err) {
		return false, nil
	}
	return err == nil, err
}

// inspectImage returns an image's details; nil when the daemon has no
// such image.
func (e *engine) inspectImage(ctx context.Context, ref string) (*imageInfo, error) {
	data, err := e.do(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, "")
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var img imageInfo
	if err := json.Unmarshal(data, &img); err != nil {
		return nil, fmt.Errorf("inspecting image %s: %v", ref, err)
	}
	return &img, nil
}

// readFile copies one file out of a container, running or not; nil when
// the container or the file does not exist.
func (e *engine) readFile(ctx context.Context, container, path string) ([]byte, error) {
	data, err := e.do(ctx, http.MethodGet, "/containers/"+url.PathEscape(container)+"/archive", url.Values{"path": {path}}, nil, "")
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(bytes.NewReader(data))
	if _, err := tr.Next(); err != nil {
		return nil, fmt.Errorf("reading %s:%s: %v", container, path, err)
	}
	return io.ReadAll(tr)
}

// writeFile puts one file into a container's directory dir (a tar stream
// that the daemon unpacks there).
func (e *engine) writeFile(ctx context.Context, container, dir, name string, data []byte, mode int64) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := e.do(ctx, http.MethodPut, "/containers/"+url.PathEscape(container)+"/archive", url.Values{"path": {dir}}, &buf, "application/x-tar")
	return err
}

// kill sends a signal to a container's main process.
func (e *engine) kill(ctx context.Context, container, signal string) error {
	_, err := e.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(container)+"/kill", url.Values{"signal": {signal}}, nil, "")
	return err
}

// controlTimeout bounds one exchange on a proxy's control channel, which
// takes it about a millisecond.
const controlTimeout = 10 * time.Second

// control sends one request to the egress proxy of a container (attached
// to its standard input) and returns the proxy's reply to it.
func (e *engine) control(ctx context.Context, container string, req egress.ControlRequest) (*egress.ControlReply, error) {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	var id [8]byte
	rand.Read(id[:])
	req.ID = hex.EncodeToString(id[:])
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	path := "/containers/" + url.PathEscape(container) + "/attach?stream=1&stdin=1&stdout=1"
	what := "docker engine API POST " + path + " (" + req.Op + ")"
	start := time.Now()
	status, rep, err := e.exchange(ctx, path, append(line, '\n'), req.ID)
	shown := ""
	if rep != nil {
		b, _ := json.Marshal(rep)
		shown = string(b)
	}
	e.run.TraceRequest(what, status, time.Since(start), shown, err)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rep, nil
}

// exchange attaches (hijacking the connection), writes line to the
// container's stdin and reads its stdout (multiplexed frames) until the
// reply to id.
func (e *engine) exchange(ctx context.Context, path string, line []byte, id string) (int, *egress.ControlReply, error) {
	conn, err := e.dial(ctx)
	if err != nil {
		return 0, nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	fail := func(status int, err error) (int, *egress.ControlReply, error) {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("no reply within %v", controlTimeout)
		case ctx.Err() != nil:
			err = ctx.Err()
		}
		return status, nil, err
	}
	hreq, err := http.NewRequest(http.MethodPost, "http://docker"+path, nil)
	if err != nil {
		return 0, nil, err
	}
	hreq.Header.Set("Connection", "Upgrade")
	hreq.Header.Set("Upgrade", "tcp")
	if err := hreq.Write(conn); err != nil {
		return fail(0, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, hreq)
	if err != nil {
		return fail(0, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, nil, refusal("attach", resp.StatusCode, data)
	}
	if _, err := conn.Write(line); err != nil {
		return fail(resp.StatusCode, err)
	}
	var out []byte
	hdr := make([]byte, 8)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			return fail(resp.StatusCode, err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(hdr[4:]))
		if _, err := io.ReadFull(br, frame); err != nil {
			return fail(resp.StatusCode, err)
		}
		if hdr[0] != 1 { // stdout only
			continue
		}
		out = append(out, frame...)
		for {
			i := bytes.IndexByte(out, '\n')
			if i < 0 {
				break
			}
			var rep egress.ControlReply
			if json.Unmarshal(out[:i], &rep) == nil && rep.ID == id {
				return resp.StatusCode, &rep, nil
			}
			out = out[i+1:]
		}
	}
}

// labelFilter is the filters parameter that selects objects by a label.
func labelFilter(label string) url.Values {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	return url.Values{"filters": {string(f)}}
}

// containerSummary is an entry of a container list (GET /containers/json,
// Engine API v1.41 "ContainerSummary": Id, Labels, State).
type containerSummary struct {
	ID     string `json:"Id"`
	Labels map[string]string
	State  string
}

// listContainers lists the containers, running or not, that carry a
// label ("key=value").
func (e *engine) listContainers(ctx context.Context, label string) ([]containerSummary, error) {
	q := labelFilter(label)
	q.Set("all", "1")
	data, err := e.do(ctx, http.MethodGet, "/containers/json", q, nil, "")
	if err != nil {
		return nil, err
	}
	var list []containerSummary
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("listing containers: %v", err)
	}
	return list, nil
}

// containersLabelled lists the IDs of the containers, running or not, that
// carry a label.
func (e *engine) containersLabelled(ctx context.Context, label string) ([]string, error) {
	list, err := e.listContainers(ctx, label)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	return ids, nil
}

// volumesLabelled lists the names of the volumes that carry a label.
func (e *engine) volumesLabelled(ctx context.Context, label string) ([]string, error) {
	data, err := e.do(ctx, http.MethodGet, "/volumes", labelFilter(label), nil, "")
	if err != nil {
		return nil, err
	}
	var list struct{ Volumes []struct{ Name string } }
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("listing volumes: %v", err)
	}
	names := make([]string, len(list.Volumes))
	for i, v := range list.Volumes {
		names[i] = v.Name
	}
	return names, nil
}

// removeContainer removes a container, running or not, with its
// anonymous volumes; one already gone is not an error.
func (e *engine) removeContainer(ctx context.Context, id string) error {
	_, err := e.do(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}, "v": {"1"}}, nil, "")
	if notFound(err) {
		return nil
	}
	return err
}

// removeKeepingVolumes removes a container sbx did not create (adopting
// it): as docker rm -f, without -v, so its anonymous volumes stay for
// their owner. One already gone is not an error.
func (e *engine) removeKeepingVolumes(ctx context.Context, id string) error {
	_, err := e.do(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}}, nil, "")
	if notFound(err) {
		return nil
	}
	return err
}

// removeVolume removes a volume; one already gone is not an error.
func (e *engine) removeVolume(ctx context.Context, name string) error {
	_, err := e.do(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), url.Values{"force": {"1"}}, nil, "")
	if notFound(err) {
		return nil
	}
	return err
}

// volumeSpec is the body of a volume create (POST /volumes/create,
// Engine API v1.41 "VolumeCreateOptions"), as `docker volume create`
// sends it.
type volumeSpec struct {
	Name       string
	Driver     string
	DriverOpts map[string]string `json:",omitempty"`
	Labels     map[string]string
}

// createVolume creates a volume; one of that name that exists is kept, as
// `docker volume create` keeps it.
func (e *engine) createVolume(ctx context.Context, v *volumeSpec) error {
	_, err := e.doJSON(ctx, http.MethodPost, "/volumes/create", nil, v)
	return err
}

// containerSpec is the body of a container create (POST
// /containers/create, Engine API v1.41: "ContainerConfig" with its
// "HostConfig"): the fields sbx sets, under the API's names, with the
// values the docker CLI sends for the corresponding flags of `docker
// create` (named beside each). A field sbx leaves out is the daemon's
// default, as for a `docker create` without that flag.
type containerSpec struct {
	Hostname   string   `json:",omitempty"` // --hostname
	Env        []string `json:",omitempty"` // -e, in order
	Cmd        []string // the arguments after the image
	Entrypoint []string `json:",omitempty"` // --entrypoint
	User       string   `json:",omitempty"` // --user
	Image      string
	WorkingDir string            `json:",omitempty"` // -w
	Labels     map[string]string // --label
	// OpenStdin without StdinOnce is what `docker run --detach
	// --interactive` makes: stdin stays open across attaches.
	OpenStdin bool
	StdinOnce bool
	// ExposedPorts are the ports -p publishes ("3000/tcp": {}).
	ExposedPorts map[string]struct{} `json:",omitempty"`
	HostConfig   hostConfig
}

// hostConfig is the part of a container create's "HostConfig" sbx sets.
type hostConfig struct {
	Binds          []string      // -v SRC:DST[:ro]
	NetworkMode    string        // --network ("default" without)
	RestartPolicy  restartPolicy // --restart
	CapAdd         []string      `json:",omitempty"` // --cap-add
	CapDrop        []string      `json:",omitempty"` // --cap-drop
	SecurityOpt    []string      `json:",omitempty"` // --security-opt
	ReadonlyRootfs bool          // --read-only
	LogConfig      logConfig     // --log-driver, --log-opt
	Runtime        string        `json:",omitempty"` // --runtime
	PidsLimit      *int64        `json:",omitempty"` // --pids-limit
	NanoCpus       int64         `json:",omitempty"` // --cpus, in billionths
	Memory         int64         `json:",omitempty"` // --memory, bytes
	MemorySwap     int64         `json:",omitempty"` // --memory-swap, bytes
	// PortBindings are -p HOST_IP:HOST_PORT:PORT, by "PORT/tcp".
	PortBindings map[string][]portBinding `json:",omitempty"`
	// ExtraHosts are --add-host NAME:IP.
	ExtraHosts []string `json:",omitempty"`
	// Tmpfs are --tmpfs PATH:OPTIONS, by path.
	Tmpfs map[string]string `json:",omitempty"`
}

type restartPolicy struct{ Name string }

type logConfig struct {
	Type   string
	Config map[string]string
}

// errNoImage is the daemon's refusal to create a container from an image
// it does not have (404 "No such image: REF"), which `docker create`
// answers by pulling.
func errNoImage(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound && strings.Contains(ae.Message, "No such image")
}

// createContainer creates a container and returns its ID.
func (e *engine) createContainer(ctx context.Context, name string, c *containerSpec) (string, error) {
	data, err := e.doJSON(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, c)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		// The daemon's answer when the name is taken (moby
		// daemon/names.go, errdefs.Conflict: "The container name … is
		// already in use by container …").
		return "", fmt.Errorf("the container name %s is in use by a container this sandbox's remove step did not remove (%w): remove or rename that container, or take it over with --adopt: %v", name, reconcile.ErrNameInUse, err)
	}
	if err != nil {
		return "", err
	}
	var created struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(data, &created); err != nil || created.ID == "" {
		return "", fmt.Errorf("creating container %s: unexpected answer %q", name, data)
	}
	return created.ID, nil
}

// startContainer starts a container; one already running is not an error
// (304).
func (e *engine) startContainer(ctx context.Context, id string) error {
	_, err := e.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, "")
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotModified {
		return nil
	}
	return err
}

// dialStdio connects to the daemon through `docker system dial-stdio`: the
// CLI resolves the endpoint (context, DOCKER_HOST, TLS, ssh) and relays
// the bytes.
func dialStdio(run *runner.Runner, docker string) (net.Conn, error) {
	if p, err := run.LookPath(docker); err == nil {
		docker = p
	}
	cmd := exec.Command(docker, "system", "dial-stdio")
	if run.Env != nil {
		cmd.Env = run.Env
	}
	c := &stdioConn{cmd: cmd}
	var err error
	if c.w, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if c.r, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	cmd.Stderr = &c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("docker system dial-stdio: %v", err)
	}
	return c, nil
}

// stdioConn is a connection carried by a dial-stdio process.
type stdioConn struct {
	cmd    *exec.Cmd
	w      io.WriteCloser
	r      io.ReadCloser
	stderr bytes.Buffer // read only once the process has been waited for
	once   sync.Once
}

func (c *stdioConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		// The relay ended: say why when it said so (stop waits for the
		// process, and so for its stderr).
		c.stop()
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			return n, fmt.Errorf("docker system dial-stdio: %s", msg)
		}
	}
	return n, err
}

func (c *stdioConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *stdioConn) Close() error {
	c.stop()
	return nil
}

func (c *stdioConn) stop() {
	c.once.Do(func() {
		c.w.Close()
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
}

func (c *stdioConn) LocalAddr() net.Addr                { return stdioAddr{} }
func (c *stdioConn) RemoteAddr() net.Addr               { return stdioAddr{} }
func (c *stdioConn) SetDeadline(t time.Time) error      { return nil }
func (c *stdioConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *stdioConn) SetWriteDeadline(t time.Time) error { return nil }

type stdioAddr struct{}

func (stdioAddr) Network() string { return "docker-dial-stdio" }
func (stdioAddr) String() string  { return "docker system dial-stdio" }

// CloseWrite ends the relay's input, as a half-close would a socket.
func (c *stdioConn) CloseWrite() error { return c.w.Close() }
