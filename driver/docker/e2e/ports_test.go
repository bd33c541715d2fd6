package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/internal/dockertest"
)

// portsEnv is a sandbox of the shell agent with ports, driven through the
// built sbx as a user drives it.
type portsEnv struct {
	*loopEnv
	runtime string
	// services is a services: block to write with the ports.
	services string
}

func newPortsEnv(t *testing.T, name, runtime string) *portsEnv {
	e := &portsEnv{loopEnv: newLoopEnv(t, name), runtime: runtime}
	return e
}

// write writes sandbox.yaml with ports.
func (e *portsEnv) write(ports ...string) {
	e.t.Helper()
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: docker\ntemplate: %s\nnetwork: {agentHosts: false}\n", e.name, env.Image)
	if e.runtime != "" {
		doc += "docker: {runtime: " + e.runtime + "}\n"
	}
	if len(ports) > 0 {
		doc += "ports: [" + strings.Join(ports, ", ") + "]\n"
	}
	doc += e.services
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *portsEnv) run(want int, args ...string) string {
	e.t.Helper()
	out, code := e.sbx(args...)
	if code != want {
		e.t.Fatalf("sbx %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, want, out)
	}
	return out
}

// serve starts busybox httpd in the sandbox on its loopback port, serving
// body; httpd goes to the background, so the exec returns.
func (e *portsEnv) serve(port int, body string) {
	e.t.Helper()
	dir := fmt.Sprintf("/tmp/www%d", port)
	e.run(0, "shell", "--", "sh", "-c", fmt.Sprintf("mkdir -p %s && echo %s > %s/index.html && httpd -p 127.0.0.1:%d -h %s", dir, body, dir, port, dir))
}

// published is the host address Docker published the sandbox's port on
// (docker port), failing the test when there is none.
func (e *portsEnv) published(port int) string {
	e.t.Helper()
	out, err := exec.Command("docker", "port", docker.PortsName(e.name), fmt.Sprintf("%d/tcp", port)).CombinedOutput()
	if err != nil {
		e.t.Fatalf("docker port: %v: %s", err, out)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	if len(lines) != 1 {
		e.t.Fatalf("sandbox port %d is published on %q, want one address", port, out)
	}
	return lines[0]
}

// get fetches / from addr on the host, as a browser would.
func get(t *testing.T, addr string) (string, error) {
	t.Helper()
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestPublishedPorts plays the user who runs a dev server in the sandbox
// and opens it from the host's browser: a port the file publishes is
// answered on the host's loopback (only there), from the server on the
// sandbox's own loopback; a port added later is a widening apply -y
// refuses without --approve-widening; adding and removing ports changes
// them in place; stop closes them and start opens
// them again; destroy leaves nothing. All the while the sandbox has no
// network interface but loopback, and cannot write the forwarder's
// socket volume.
func TestPublishedPorts(t *testing.T) {
	e := newPortsEnv(t, "e2e-ports", "")
	e.write(`"8000"`)
	plan := e.run(0, "plan")
	if want := `+ ports: "8000/tcp"`; !strings.Contains(plan, want) {
		t.Errorf("the plan does not say %q:\n%s", want, plan)
	}
	e.run(0, "apply", "-y")
	id := dockertest.ContainerID(t, docker.ContainerName(e.name))
	e.serve(8000, "hello-from-the-sandbox")
	addr := e.published(8000)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("port 8000 is published on %s, want the host's loopback", addr)
	}
	if body, err := get(t, addr); err != nil || strings.TrimSpace(body) != "hello-from-the-sandbox" {
		t.Fatalf("GET %s: %q, %v", addr, body, err)
	}
	if out := e.run(0, "plan", "--detailed-exitcode"); !strings.Contains(out, "No changes") {
		t.Errorf("plan after the apply:\n%s", out)
	}
	if out := e.run(0, "status"); !strings.Contains(out, "published: "+addr+"->8000/tcp") {
		t.Errorf("status does not say where port 8000 is published (%s):\n%s", addr, out)
	}

	// The sandbox still has no way out but its proxy, and the agent
	// cannot touch the forwarder's socket.
	if out := e.run(0, "shell", "--", "cat", "/proc/net/dev"); strings.Count(out, ":") != 1 || !strings.Contains(out, "lo:") {
		t.Errorf("the sandbox's network interfaces:\n%s", out)
	}
	if out, code := e.sbx("shell", "--", "sh", "-c", "rm -f /run/sbx-ports/ports.sock || touch /run/sbx-ports/x"); code == 0 {
		t.Errorf("the agent wrote the forwarder's socket volume:\n%s", out)
	}

	// More ports, in place, once approved; one where nothing listens is
	// closed.
	e.write(`"8000"`, `"127.0.0.1::8001"`, `"8002"`)
	if out := e.run(1, "apply", "-y"); !strings.Contains(out, "! publishes sandbox port 8002/tcp on the host's loopback") {
		t.Errorf("apply -y of more ports:\n%s", out)
	}
	e.run(0, "apply", "-y", "--approve-widening")
	if dockertest.ContainerID(t, docker.ContainerName(e.name)) != id {
		t.Fatal("adding a port replaced the sandbox")
	}
	e.serve(8001, "second-port")
	if body, err := get(t, e.published(8001)); err != nil || strings.TrimSpace(body) != "second-port" {
		t.Errorf("GET the second port: %q, %v", body, err)
	}
	if body, err := get(t, e.published(8000)); err != nil || strings.TrimSpace(body) != "hello-from-the-sandbox" {
		t.Errorf("GET the first port after the change: %q, %v", body, err)
	}
	if body, err := get(t, e.published(8002)); err == nil {
		t.Errorf("GET a port nothing listens on answered %q", body)
	}

	// Stop closes them; apply opens them again. The sandbox.local.yaml
	// removed meanwhile comes back as the empty placeholder, not as the
	// directory Docker makes for a bind's missing source (its read-only
	// bind gone, the plan replaces the sandbox).
	e.run(0, "stop")
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Errorf("%s accepts connections while the sandbox is stopped", addr)
	}
	local := filepath.Join(e.ws, "sandbox.local.yaml")
	if err := os.Remove(local); err != nil {
		t.Fatal(err)
	}
	e.run(0, "apply", "-y")
	if fi, err := os.Stat(local); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("sandbox.local.yaml after the start: %v, %v", fi, err)
	}
	id = dockertest.ContainerID(t, docker.ContainerName(e.name))
	e.serve(8000, "after-the-restart")
	if body, err := get(t, e.published(8000)); err != nil || strings.TrimSpace(body) != "after-the-restart" {
		t.Errorf("GET after the restart: %q, %v", body, err)
	}

	// No ports: the forwarder and its network go, the sandbox stays.
	e.write()
	e.run(0, "apply", "-y")
	if dockertest.ContainerID(t, docker.ContainerName(e.name)) != id {
		t.Fatal("removing the ports replaced the sandbox")
	}
	for _, kind := range []string{"container", "network"} {
		if out, err := exec.Command("docker", kind, "inspect", docker.PortsName(e.name)).CombinedOutput(); err == nil {
			t.Errorf("the %s %s is still there:\n%s", kind, docker.PortsName(e.name), out)
		}
	}
	e.write(`"8000"`)
	e.run(0, "apply", "-y", "--approve-widening")
	e.run(0, "destroy", "-y")
	if left := dockertest.Leftovers(e.name); left != "" {
		t.Errorf("destroy left %s", left)
	}
}

// TestPublishedPortsRunsc is the dev server and a service under gVisor:
// the sandbox's init and the service's reach their sockets as the
// sandbox reaches the proxy's (runsc --host-uds=open: dial, never listen).
func TestPublishedPortsRunsc(t *testing.T) {
	env.RequireRunsc(t)
	e := newPortsEnv(t, "e2e-ports-runsc", "runsc")
	e.services = fmt.Sprintf(`services:
  db:
    image: %s
    command: [sh, -c, "mkdir -p /www && echo hello-from-db > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"]
    ports: [8080]
    ready: {command: [sh, -c, "wget -q -O- http://127.0.0.1:8080/ | grep -q hello-from-db"]}
`, env.Image)
	e.write(`"8000"`)
	e.run(0, "apply", "-y")
	e.serve(8000, "hello-from-gvisor")
	if body, err := get(t, e.published(8000)); err != nil || strings.TrimSpace(body) != "hello-from-gvisor" {
		t.Fatalf("GET: %q, %v", body, err)
	}
	// Apply waited for the readiness check.
	if out, _ := e.sbx("shell", "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 10 db 8080`); !strings.Contains(out, "hello-from-db") {
		t.Errorf("the service under gVisor: %q", out)
	}
}

// TestHostPorts plays the user with a model gateway on the host's
// loopback, and the hostile agent who wants the rest of the host: a port
// network.hostPorts lists is reached as host.docker.internal:PORT
// through the proxy; another port of the host is refused, even under
// policy allow; adding a host port is a widening apply -y refuses without
// --approve-widening, and once approved it is reached in place; the
// relay's socket is nowhere in the sandbox.
func TestHostPorts(t *testing.T) {
	served := func(body string) int {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().(*net.TCPAddr).Port
	}
	gateway, other := served("the-gateway"), served("the-rest-of-the-host")
	e := newPortsEnv(t, "e2e-hostports", "")
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: docker\ntemplate: %s\nnetwork: {agentHosts: false, hostPorts: [%d]}\n", e.name, env.Image, gateway)
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	fetch := func(port int) string {
		t.Helper()
		out, _ := e.sbx("shell", "--", "sh", "-c", fmt.Sprintf(`printf 'GET http://host.docker.internal:%d/ HTTP/1.0\r\n\r\n' | nc -w 10 127.0.0.1 3128`, port))
		return out
	}
	local := func(doc string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(e.ws, "sandbox.local.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.run(0, "apply", "-y")
	id := dockertest.ContainerID(t, docker.ContainerName(e.name))
	if out := fetch(gateway); !strings.Contains(out, "the-gateway") {
		t.Fatalf("the listed host port: %q", out)
	}
	if out := fetch(other); !strings.Contains(out, "403") || strings.Contains(out, "the-rest-of-the-host") {
		t.Errorf("another host port: %q", out)
	}
	if out, code := e.sbx("shell", "--", "ls", "/run/sbx-host"); code == 0 {
		t.Errorf("the relay's socket directory is in the sandbox:\n%s", out)
	}

	// The agent's overlay: allow everything. The host stays out of
	// reach but for the listed port.
	local("network: {policy: allow}\n")
	e.run(0, "apply", "-y", "--approve-widening")
	if out := fetch(other); !strings.Contains(out, "403") || strings.Contains(out, "the-rest-of-the-host") {
		t.Errorf("another host port under policy allow: %q", out)
	}

	// Another host port: a widening, reached once approved, in place.
	local(fmt.Sprintf("network: {hostPorts: [%d, %d]}\n", gateway, other))
	want := fmt.Sprintf("! reaches port %d on the host's loopback (as host.docker.internal:%d)", other, other)
	if out := e.run(1, "apply", "-y"); !strings.Contains(out, want) {
		t.Errorf("apply -y of another host port does not say %q:\n%s", want, out)
	}
	e.run(0, "apply", "-y", "--approve-widening")
	if dockertest.ContainerID(t, docker.ContainerName(e.name)) != id {
		t.Error("adding a host port replaced the sandbox")
	}
	if out := fetch(other); !strings.Contains(out, "the-rest-of-the-host") {
		t.Errorf("the added host port: %q", out)
	}
	if out := e.run(0, "plan", "--detailed-exitcode"); !strings.Contains(out, "No changes") {
		t.Errorf("plan after the apply:\n%s", out)
	}
	e.run(0, "destroy", "-y")
	if left := dockertest.Leftovers(e.name); left != "" {
		t.Errorf("destroy left %s", left)
	}
}

// TestServices plays the agent whose test suite needs a database: a
// service the file declares runs beside the sandbox and is reached by
// name over plain TCP, on its declared port only; it has no network of
// its own (nothing reaches it but the proxy, and it reaches nothing); the
// plan shows it; stop stops it and apply starts it and waits for it to be
// ready again; destroy removes it.
func TestServices(t *testing.T) {
	e := newPortsEnv(t, "e2e-svc", "")
	doc := fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
network: {agentHosts: false, allow: ["%s:8080"]}
services:
  db:
    image: %s
    command: [sh, -c, "mkdir -p /www && echo hello-from-db > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"]
    ports: [8080]
    ready: {command: [sh, -c, "wget -q -O- http://127.0.0.1:8080/ | grep -q hello-from-db"], timeout: 60s}
  fetcher:
    image: %s
    command: [sh, -c, "exec httpd -f -p 127.0.0.1:8081 -h /"]
    ports: [8081]
    egress: true
`, e.name, env.Image, env.WebIP, env.Image, env.Image)
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := e.run(0, "plan")
	if want := "+ services.db: \"image " + env.Image + ", ports 8080"; !strings.Contains(plan, want) {
		t.Errorf("the plan does not say %q:\n%s", want, plan)
	}
	e.run(0, "apply", "-y")
	// Plain TCP, by name, as a database client connects.
	tcp := func(target string) string {
		t.Helper()
		out, _ := e.sbx("shell", "--", "sh", "-c", fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 10 %s`, target))
		return out
	}
	if out := tcp("db 8080"); !strings.Contains(out, "hello-from-db") {
		t.Fatalf("the service by name: %q", out)
	}
	// Another port of the service, and an unlisted host, through the
	// proxy: refused.
	via := func(target string) string {
		t.Helper()
		out, _ := e.sbx("shell", "--", "sh", "-c", fmt.Sprintf(`printf 'GET http://%s/ HTTP/1.0\r\n\r\n' | nc -w 10 127.0.0.1 3128`, target))
		return out
	}
	if out := via("db:22"); !strings.Contains(out, "403") {
		t.Errorf("another port of the service: %q", out)
	}
	if out := via(env.WebName + ":8080"); !strings.Contains(out, "403") {
		t.Errorf("an unlisted host: %q", out)
	}
	// The service has no network: it reaches nothing.
	svc := docker.ServiceContainer(e.name, "db")
	out, _ := exec.Command("docker", "exec", svc, "cat", "/proc/net/dev").CombinedOutput()
	if strings.Count(string(out), ":") != 1 || !strings.Contains(string(out), "lo:") {
		t.Errorf("the service's network interfaces:\n%s", out)
	}
	if out, err := exec.Command("docker", "exec", svc, "wget", "-q", "-T", "3", "-O-", "http://"+env.WebIP+":8080/").CombinedOutput(); err == nil {
		t.Errorf("the service reached the test web server:\n%s", out)
	}
	// A service with egress: the sandbox's proxy and policy. The allowed
	// address answers; the server by name (not allowed) does not.
	fetcher := docker.ServiceContainer(e.name, "fetcher")
	fetch := func(target string) string {
		t.Helper()
		out, _ := exec.Command("docker", "exec", fetcher, "sh", "-c",
			fmt.Sprintf(`printf 'GET http://%s/ HTTP/1.0\r\n\r\n' | nc -w 10 127.0.0.1 3128`, target)).CombinedOutput()
		return string(out)
	}
	if out := fetch(env.WebIP + ":8080"); !strings.Contains(out, "hello-from-web") {
		t.Errorf("the service with egress, to an allowed address: %q", out)
	}
	if out := fetch(env.WebName + ":8080"); !strings.Contains(out, "403") {
		t.Errorf("the service with egress, to a host the policy does not allow: %q", out)
	}
	if out := e.run(0, "plan", "--detailed-exitcode"); !strings.Contains(out, "No changes") {
		t.Errorf("plan after the apply:\n%s", out)
	}
	if out := e.run(0, "status"); !strings.Contains(out, "in sync") {
		t.Errorf("status:\n%s", out)
	}
	if out, code := e.sbx("shell", "--", "ls", "/run/sbx-svc"); code == 0 {
		t.Errorf("the services' sockets are in the sandbox:\n%s", out)
	}
	// The hostile agent's overlay: a service of its choosing. A widening
	// apply -y refuses.
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.local.yaml"), []byte("services:\n  evil: {image: evil/miner, ports: [4444]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := e.run(1, "apply", "-y"); !strings.Contains(out, "! runs service image evil/miner (from sandbox.local.yaml") {
		t.Errorf("apply -y of the agent's service:\n%s", out)
	}
	// Emptied, not removed: the sandbox binds it read-only.
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.local.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// Stop stops it; apply starts it and waits until it is ready.
	e.run(0, "stop")
	if out, _ := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", svc).Output(); strings.TrimSpace(string(out)) != "false" {
		t.Errorf("the service runs after stop: %s", out)
	}
	e.run(0, "apply", "-y")
	if out := tcp("db 8080"); !strings.Contains(out, "hello-from-db") {
		t.Errorf("the service after the restart: %q", out)
	}
	// A service removed by hand is made again.
	exec.Command("docker", "rm", "-f", svc).Run()
	plan = e.run(0, "plan")
	if !strings.Contains(plan, "service db") {
		t.Errorf("the plan does not make the removed service again:\n%s", plan)
	}
	e.run(0, "apply", "-y")
	if out := tcp("db 8080"); !strings.Contains(out, "hello-from-db") {
		t.Errorf("the service made again: %q", out)
	}
	e.run(0, "destroy", "-y")
	if left := dockertest.Leftovers(e.name); left != "" {
		t.Errorf("destroy left %s", left)
	}
}
