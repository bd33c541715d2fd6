// Package docker is the driver for plain Docker Engine (Linux, CI): the
// sandbox is a container with no network interface but loopback, whose only
// way out is sbx's egress proxy in a sibling container, reached through a
// Unix socket on a shared volume. The policy lives on a volume only the
// proxy mounts. Everything sbx creates carries sbx's labels, and destroy
// removes exactly that.
package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Labels on everything sbx creates.
const (
	LabelManaged = "dev.sbx.managed"
	LabelSandbox = "dev.sbx.sandbox"
	LabelRole    = "dev.sbx.role"
	LabelRecord  = "dev.sbx.record"
	labelWS      = "dev.sbx.workspace"
)

// Paths inside the containers.
const (
	helperPath = "/.sbx/sbx"       // sbx's static binary in the sandbox
	socketDir  = "/run/sbx-egress" // the shared socket volume
	socketPath = socketDir + "/egress.sock"
	policyPath = "/policy/policy.json" // in the egress container only
	proxyURL   = "http://127.0.0.1:3128"
)

// Options configure the driver.
type Options struct {
	Runner *runner.Runner
	// Docker is the docker CLI.
	Docker string
	// Binary is a static Linux build of sbx: the egress proxy's image and
	// the sandbox's init and bridge.
	Binary string
}

// Driver is the docker driver.
type Driver struct {
	opts Options
	// created remembers the sandboxes this driver created during this
	// apply: their policy is already written, so the network step that
	// follows a create has nothing left to do.
	created map[string]bool
	// egressTag is the proxy image known to exist.
	egressTag string
}

var _ reconcile.Driver = (*Driver)(nil)

// New returns a docker driver.
func New(opts Options) *Driver {
	if opts.Runner == nil {
		opts.Runner = &runner.Runner{}
	}
	if opts.Docker == "" {
		opts.Docker = "docker"
	}
	return &Driver{opts: opts}
}

// Name is the driver's name in sandbox.yaml.
func (d *Driver) Name() string { return "docker" }

// Caps is the docker driver's table of what changes in place.
func (d *Driver) Caps() reconcile.Caps { return reconcile.DockerCaps() }

// Executable is the docker CLI.
func (d *Driver) Executable() string { return d.opts.Docker }

// SandboxHelper is where sbx's own binary is inside a sandbox.
func (d *Driver) SandboxHelper() string { return helperPath }

func (d *Driver) docker(ctx context.Context, args ...string) ([]byte, error) {
	return d.opts.Runner.Output(ctx, append([]string{d.opts.Docker}, args...)...)
}

// Version asks the daemon its version; it fails when no daemon answers.
func (d *Driver) Version(ctx context.Context) (string, error) {
	out, err := d.docker(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return "", fmt.Errorf("cannot reach a Docker daemon: %v", err)
	}
	return "engine " + strings.TrimSpace(string(out)), nil
}

// CheckStatic reports whether path is a static Linux executable, which the
// containers can run whatever their image holds.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable (%v); the docker driver needs a static Linux build of sbx: CGO_ENABLED=0 GOOS=linux go build ./cmd/sbx, then set SBX_STATIC_BINARY to it", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the docker driver needs a static build of sbx: CGO_ENABLED=0 go build ./cmd/sbx, then set SBX_STATIC_BINARY to it", path)
		}
	}
	return nil
}

// Preflight rejects what the docker driver cannot do before anything runs.
func (d *Driver) Preflight(sp *spec.Spec) error {
	if len(sp.Ports) > 0 {
		return fmt.Errorf("sandbox %q: the docker driver cannot publish ports: the sandbox has no network interface but loopback (its only way out is the egress proxy)", sp.Name)
	}
	return CheckStatic(d.opts.Binary)
}

// BuildHash fingerprints a template's build context.
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) {
	if sp.Template.Build == nil {
		return "", nil
	}
	return buildctx.Hash(sp.Template.Build)
}

func containerName(name string) string { return "sbx-" + name }
func egressName(name string) string    { return "sbx-" + name + "-egress" }
func volumeName(name, role string) string {
	return "sbx-" + name + "-" + role
}

// templateImage is the image a sandbox runs: the template's image, or the
// tag sbx gives a built template (named by its content hash).
func templateImage(sp *spec.Spec, hash string) string {
	if sp.Template.Image != "" {
		return sp.Template.Image
	}
	h := strings.TrimPrefix(hash, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return "sbx-template-" + strings.ToLower(sp.Name) + ":" + h
}

// psEntry is one line of `docker ps --format '{{json .}}'`.
type psEntry struct {
	ID     string `json:"ID"`
	Names  string `json:"Names"`
	Labels string `json:"Labels"`
}

// inspect is the part of `docker inspect` the driver reads.
type inspect struct {
	ID     string
	Name   string
	Config struct {
		Image  string
		Labels map[string]string
	}
	State struct {
		Status  string
		Running bool
	}
	HostConfig struct {
		Runtime  string
		NanoCpus int64
		Memory   int64
	}
	Mounts []struct {
		Type        string
		Source      string
		Destination string
		RW          bool
	}
}

// Observe lists all containers once, inspects the declared sandboxes' in
// one call, and reads each existing sandbox's live policy (one call each).
func (d *Driver) Observe(ctx context.Context, names []string) (map[string]*reconcile.Live, error) {
	out, err := d.docker(ctx, "ps", "-a", "--no-trunc", "--format", "{{json .}}")
	if err != nil {
		return nil, err
	}
	want := map[string]string{}
	for _, n := range names {
		want[containerName(n)] = n
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var e psEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("docker ps: %v", err)
		}
		for _, n := range strings.Split(e.Names, ",") {
			if _, ok := want[n]; ok {
				ids = append(ids, e.ID)
			}
		}
	}
	live := map[string]*reconcile.Live{}
	if len(ids) == 0 {
		return live, nil
	}
	out, err = d.docker(ctx, append([]string{"inspect", "--type", "container"}, ids...)...)
	if err != nil {
		return nil, err
	}
	var infos []inspect
	if err := json.Unmarshal(out, &infos); err != nil {
		return nil, fmt.Errorf("docker inspect: %v", err)
	}
	for _, in := range infos {
		name := want[strings.TrimPrefix(in.Name, "/")]
		l := &reconcile.Live{Name: name, Exists: true, Status: in.State.Status, Template: in.Config.Image}
		if in.Config.Labels[LabelManaged] != "true" || in.Config.Labels[LabelSandbox] != name {
			live[name] = l // a same-named container sbx did not create
			continue
		}
		l.Managed = true
		if strings.HasPrefix(l.Template, "sbx-template-"+strings.ToLower(name)+":") {
			// A template sbx built and tagged by content: the file names no
			// image; the build hash in the record tracks it.
			l.Template = ""
		}
		l.Agent = in.Config.Labels["dev.sbx.agent"]
		if rec := in.Config.Labels[LabelRecord]; rec != "" {
			var r reconcile.Record
			if err := json.Unmarshal([]byte(rec), &r); err == nil {
				l.Record = &r
			}
		}
		ws := in.Config.Labels[labelWS]
		for _, m := range in.Mounts {
			switch {
			case m.Type != "bind" || m.Destination == helperPath:
			case m.Destination == ws:
				l.Workspace = spec.Workspace{Path: m.Source, ReadOnly: !m.RW}
			default:
				l.Mounts = append(l.Mounts, spec.Mount{Source: m.Source, Target: m.Destination, ReadOnly: !m.RW})
			}
		}
		sort.Slice(l.Mounts, func(i, j int) bool { return l.Mounts[i].Target < l.Mounts[j].Target })
		l.Resources = spec.Resources{CPUs: float64(in.HostConfig.NanoCpus) / 1e9, Memory: in.HostConfig.Memory}
		if rt := in.HostConfig.Runtime; rt != "runc" && rt != "" {
			l.Runtime = rt
		}
		pol, err := d.readPolicy(ctx, name)
		if err != nil {
			return nil, err
		}
		if pol != nil {
			l.Network = reconcile.LiveNetwork{Policy: pol.Default, Allow: pol.Allow, Deny: pol.Deny, BlockCIDRs: pol.BlockCIDRs}
		}
		live[name] = l
	}
	return live, nil
}

// readFile copies one file out of a container (`docker cp C:PATH -`, a tar
// stream); nil when the container or file is gone.
func (d *Driver) readFile(ctx context.Context, container, path string) ([]byte, error) {
	out, err := d.docker(ctx, "cp", container+":"+path, "-")
	if err != nil {
		var re *runner.Error
		if errors.As(err, &re) && (strings.Contains(re.Stderr, "No such container") || strings.Contains(re.Stderr, "Could not find the file") || strings.Contains(re.Stderr, "No such file")) {
			return nil, nil
		}
		return nil, err
	}
	tr := tar.NewReader(bytes.NewReader(out))
	if _, err := tr.Next(); err != nil {
		return nil, fmt.Errorf("docker cp %s:%s: %v", container, path, err)
	}
	return io.ReadAll(tr)
}

func (d *Driver) readPolicy(ctx context.Context, name string) (*egress.Policy, error) {
	data, err := d.readFile(ctx, egressName(name), policyPath)
	if err != nil || data == nil {
		return nil, err
	}
	var p egress.Policy
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("live policy of %q: %v", name, err)
	}
	return &p, nil
}

// policyOf is the proxy's policy for a sandbox: the file's rules with the
// agent's hosts and presets, and the blocked ranges.
func policyOf(sp *spec.Spec) egress.Policy {
	p := egress.Policy{Default: sp.Network.Policy, Allow: []string{}, Deny: []string{}, BlockCIDRs: []string{}}
	for _, r := range sp.Network.AllowRules(sp.Agent) {
		p.Allow = append(p.Allow, r.Host)
	}
	p.Deny = append(p.Deny, sp.Network.Deny...)
	sort.Strings(p.Deny)
	for _, c := range sp.Network.BlockCIDRs {
		p.BlockCIDRs = append(p.BlockCIDRs, c.String())
	}
	sort.Strings(p.BlockCIDRs)
	return p
}

// Do carries out one step.
func (d *Driver) Do(ctx context.Context, s reconcile.Step, sp *spec.Spec, _ reconcile.Secrets) error {
	switch s.Kind {
	case reconcile.StepBuild:
		return d.build(ctx, sp)
	case reconcile.StepStop:
		return d.ignoreMissing(d.docker(ctx, "stop", "--time", "5", containerName(s.Sandbox), egressName(s.Sandbox)))
	case reconcile.StepRemove:
		return d.remove(ctx, s.Sandbox)
	case reconcile.StepCreate:
		return d.create(ctx, sp, s.Record)
	case reconcile.StepSetNetwork:
		if d.created[s.Sandbox] {
			delete(d.created, s.Sandbox)
			return nil // create wrote this very policy before the proxy started
		}
		return d.setPolicy(ctx, sp, true)
	case reconcile.StepSetSecrets:
		return nil // secrets reach the agent per exec
	case reconcile.StepUpdateResources:
		args := []string{"update"}
		if sp.Resources.CPUs > 0 {
			args = append(args, "--cpus", strconv.FormatFloat(sp.Resources.CPUs, 'f', -1, 64))
		}
		if sp.Resources.Memory > 0 {
			args = append(args, "--memory", strconv.FormatInt(sp.Resources.Memory, 10), "--memory-swap", "-1")
		}
		if len(args) == 1 {
			return nil
		}
		_, err := d.docker(ctx, append(args, containerName(s.Sandbox))...)
		return err
	case reconcile.StepVerify:
		return d.verify(ctx, s.Sandbox)
	}
	return fmt.Errorf("the docker driver cannot %s", s.Kind)
}

func (d *Driver) ignoreMissing(_ []byte, err error) error {
	var re *runner.Error
	if errors.As(err, &re) && strings.Contains(re.Stderr, "No such") {
		return nil
	}
	return err
}

// remove deletes every object labelled as this sandbox's: containers,
// then volumes.
func (d *Driver) remove(ctx context.Context, name string) error {
	filter := "label=" + LabelSandbox + "=" + name
	out, err := d.docker(ctx, "ps", "-aq", "--filter", filter)
	if err != nil {
		return err
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if _, err := d.docker(ctx, append([]string{"rm", "-f", "-v"}, ids...)...); err != nil {
			return err
		}
	}
	out, err = d.docker(ctx, "volume", "ls", "-q", "--filter", filter)
	if err != nil {
		return err
	}
	if vols := strings.Fields(string(out)); len(vols) > 0 {
		if _, err := d.docker(ctx, append([]string{"volume", "rm", "-f"}, vols...)...); err != nil {
			return err
		}
	}
	return nil
}

func labels(name, role string) []string {
	return []string{"--label", LabelManaged + "=true", "--label", LabelSandbox + "=" + name, "--label", LabelRole + "=" + role}
}

// egressImage builds (once per sbx binary) the proxy's image: FROM
// scratch with only the static binary.
func (d *Driver) egressImage(ctx context.Context) (string, error) {
	if err := CheckStatic(d.opts.Binary); err != nil {
		return "", err
	}
	f, err := os.Open(d.opts.Binary)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	tag := "sbx-egress:" + hex.EncodeToString(h.Sum(nil))[:12]
	if d.egressTag == tag {
		return tag, nil
	}
	if _, err := d.docker(ctx, "image", "inspect", "--format", "{{.Id}}", tag); err == nil {
		d.egressTag = tag
		return tag, nil
	}
	dir, err := os.MkdirTemp("", "sbx-egress-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := copyFile(d.opts.Binary, filepath.Join(dir, "sbx")); err != nil {
		return "", err
	}
	dockerfile := "FROM scratch\nCOPY sbx /sbx\nENTRYPOINT [\"/sbx\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	if _, err := d.docker(ctx, "build", "-q", "--label", LabelManaged+"=true", "-t", tag, dir); err != nil {
		return "", err
	}
	d.egressTag = tag
	return tag, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// build builds a template from its Dockerfile, tagged by content hash.
func (d *Driver) build(ctx context.Context, sp *spec.Spec) error {
	b := sp.Template.Build
	hash, err := buildctx.Hash(b)
	if err != nil {
		return err
	}
	args := []string{"build", "-q", "-t", templateImage(sp, hash), "-f", filepath.Join(b.Context, b.Dockerfile)}
	for _, k := range cliutil.SortedKeys(b.Args) {
		args = append(args, "--build-arg", k+"="+b.Args[k])
	}
	if b.Target != "" {
		args = append(args, "--target", b.Target)
	}
	_, err = d.docker(ctx, append(args, b.Context)...)
	return err
}

// create makes the volumes, the egress container (policy written before
// it starts) and the sandbox container.
func (d *Driver) create(ctx context.Context, sp *spec.Spec, rec *reconcile.Record) error {
	image, err := d.egressImage(ctx)
	if err != nil {
		return err
	}
	hash := ""
	if rec != nil {
		hash = rec.BuildHash
	}
	if sp.Template.Build != nil && hash == "" {
		if hash, err = buildctx.Hash(sp.Template.Build); err != nil {
			return err
		}
	}
	tmpl := templateImage(sp, hash)
	for _, role := range []string{"sock", "policy"} {
		if _, err := d.docker(ctx, append(append([]string{"volume", "create"}, labels(sp.Name, role+"-volume")...), volumeName(sp.Name, role))...); err != nil {
			return err
		}
	}
	// The proxy writes the policy onto its volume at first start
	// (--init-policy); later changes are written there by setPolicy.
	pol, err := json.Marshal(policyOf(sp))
	if err != nil {
		return err
	}
	eg := append([]string{"create", "--name", egressName(sp.Name)}, labels(sp.Name, "egress")...)
	eg = append(eg,
		"--restart", "unless-stopped",
		"-v", volumeName(sp.Name, "sock")+":"+socketDir,
		"-v", volumeName(sp.Name, "policy")+":/policy",
		// Decisions go to the container's log (docker logs), which is
		// cheap to read from the host.
		image, "__egress-proxy", "--policy", policyPath, "--init-policy", string(pol),
		"--listen", "unix:"+socketPath)
	if _, err := d.docker(ctx, eg...); err != nil {
		return err
	}
	// The proxy starts while the sandbox container is created: neither
	// needs the other until the sandbox starts.
	egressStarted := make(chan error, 1)
	go func() {
		_, err := d.docker(ctx, "start", egressName(sp.Name))
		egressStarted <- err
	}()
	sb := append([]string{"create", "--name", containerName(sp.Name)}, labels(sp.Name, "sandbox")...)
	sb = append(sb, "--label", "dev.sbx.agent="+sp.Agent, "--label", labelWS+"="+sp.Workspace.Path)
	if rec != nil {
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		sb = append(sb, "--label", LabelRecord+"="+string(data))
	}
	sb = append(sb, "--network", "none", "--hostname", sp.Name, "--restart", "unless-stopped",
		"--entrypoint", helperPath,
		"-v", d.opts.Binary+":"+helperPath+":ro",
		"-v", volumeName(sp.Name, "sock")+":"+socketDir,
		"-v", bind(sp.Workspace.Path, sp.Workspace.Path, sp.Workspace.ReadOnly),
		"-w", sp.Workspace.Path)
	for _, m := range sp.Mounts {
		sb = append(sb, "-v", bind(m.Source, m.Target, m.ReadOnly))
	}
	for _, kv := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		sb = append(sb, "-e", kv+"="+proxyURL)
	}
	sb = append(sb, "-e", "NO_PROXY=localhost,127.0.0.1,::1", "-e", "no_proxy=localhost,127.0.0.1,::1")
	if sp.Docker.Runtime != "" {
		sb = append(sb, "--runtime", sp.Docker.Runtime)
	}
	if sp.Resources.CPUs > 0 {
		sb = append(sb, "--cpus", strconv.FormatFloat(sp.Resources.CPUs, 'f', -1, 64))
	}
	if sp.Resources.Memory > 0 {
		sb = append(sb, "--memory", strconv.FormatInt(sp.Resources.Memory, 10), "--memory-swap", "-1")
	}
	if len(sp.Env) > 0 {
		f, err := cliutil.EnvFile(sp.Env)
		if err != nil {
			return err
		}
		defer os.Remove(f)
		sb = append(sb, "--env-file", f)
	}
	sb = append(sb, tmpl, "__sandbox-init", "--socket", socketPath)
	// docker create pulls a missing image itself; say plainly when it
	// cannot.
	_, err = d.docker(ctx, sb...)
	if egErr := <-egressStarted; egErr != nil {
		return egErr
	}
	if err != nil {
		var re *runner.Error
		if errors.As(err, &re) && (strings.Contains(re.Stderr, "Unable to find image") || strings.Contains(re.Stderr, "pull access denied") || strings.Contains(re.Stderr, "No such image")) {
			return fmt.Errorf("template image %s is not on this machine and cannot be pulled (build it, or docker pull it where a registry is reachable): %v", tmpl, err)
		}
		return err
	}
	if _, err := d.docker(ctx, "start", containerName(sp.Name)); err != nil {
		return err
	}
	if d.created == nil {
		d.created = map[string]bool{}
	}
	d.created[sp.Name] = true
	return nil
}

func bind(src, dst string, ro bool) string {
	s := src + ":" + dst
	if ro {
		s += ":ro"
	}
	return s
}

// setPolicy writes the proxy's policy onto its volume (docker cp of a tar
// stream) and, when the proxy runs, makes it reload: no restart.
func (d *Driver) setPolicy(ctx context.Context, sp *spec.Spec, reload bool) error {
	data, err := json.MarshalIndent(policyOf(sp), "", "  ")
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: filepath.Base(policyPath), Mode: 0o644, Size: int64(len(data)), ModTime: time.Now()})
	tw.Write(data)
	tw.Close()
	if err := d.opts.Runner.Run(ctx, runner.Cmd{Args: []string{d.opts.Docker, "cp", "-", egressName(sp.Name) + ":" + filepath.Dir(policyPath)}, Stdin: &buf}); err != nil {
		return err
	}
	if !reload {
		return nil
	}
	_, err = d.docker(ctx, "kill", "--signal", "HUP", egressName(sp.Name))
	return err
}

func (d *Driver) verify(ctx context.Context, name string) error {
	out, err := d.docker(ctx, "inspect", "--type", "container", "--format", "{{.Name}} {{.State.Running}}", containerName(name), egressName(name))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasSuffix(line, " true") {
			return fmt.Errorf("container %s is not running", strings.Fields(line)[0])
		}
	}
	return nil
}

// Exec runs argv in the sandbox (`docker exec`); secrets go as -e NAME with
// the value only in the docker CLI's environment.
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o cliutil.ExecOptions) (int, error) {
	flags, env := cliutil.ExecArgs(o)
	args := append(append(append([]string{d.opts.Docker, "exec"}, flags...), containerName(name)), argv...)
	return cliutil.ExitCode(d.opts.Runner.Run(ctx, runner.Cmd{Args: args, Env: env, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr}))
}

// logEntry is a decision line of the proxy's log (see egress).
type logEntry struct {
	Time     time.Time `json:"time"`
	Method   string    `json:"method"`
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	Rule     string    `json:"rule"`
	Status   int       `json:"status"`
}

// readLog returns the proxy's decision lines (its container log), those
// since a time when since is not zero.
func (d *Driver) readLog(ctx context.Context, name string, since time.Time) ([]string, error) {
	args := []string{"logs"}
	if !since.IsZero() {
		args = append(args, "--since", since.UTC().Format(time.RFC3339Nano))
	}
	var out bytes.Buffer
	err := d.opts.Runner.Run(ctx, runner.Cmd{Args: append([]string{d.opts.Docker}, append(args, egressName(name))...), Stdout: &out, Stderr: &out})
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, `"decision"`) {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// NetLog prints the proxy's decisions: JSON lines with asJSON, else one
// readable line each; with follow it keeps printing new ones until ctx
// ends.
func (d *Driver) NetLog(ctx context.Context, name string, asJSON, follow bool, w io.Writer) error {
	seen := 0
	for {
		lines, err := d.readLog(ctx, name, time.Time{})
		if err != nil {
			return err
		}
		for _, l := range lines[min(seen, len(lines)):] {
			if asJSON {
				fmt.Fprintln(w, l)
				continue
			}
			var e logEntry
			if json.Unmarshal([]byte(l), &e) == nil {
				fmt.Fprintf(w, "%s %-5s %s %s:%d (%s; rule %s)\n", e.Time.Format(time.RFC3339), e.Decision, e.Method, e.Host, e.Port, e.Reason, e.Rule)
			}
		}
		seen = len(lines)
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// Denials counts the requests the proxy denied in [since, until].
func (d *Driver) Denials(ctx context.Context, name string, since, until time.Time) (int, error) {
	lines, err := d.readLog(ctx, name, since)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range lines {
		var e logEntry
		if json.Unmarshal([]byte(l), &e) == nil && e.Decision == "deny" && !e.Time.Before(since) && !e.Time.After(until) {
			n++
		}
	}
	return n, nil
}

// RuntimeCheck says whether the daemon has gVisor's runsc runtime, and how
// to add it.
func (d *Driver) RuntimeCheck(ctx context.Context) (bool, string) {
	out, err := d.docker(ctx, "info", "--format", "{{json .Runtimes}}")
	if err != nil {
		return false, err.Error()
	}
	var rts map[string]any
	json.Unmarshal(out, &rts)
	if _, ok := rts["runsc"]; ok {
		return true, ""
	}
	return false, `add to /etc/docker/daemon.json and restart dockerd:
  {"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}}}
(Debian/Ubuntu: apt-get install runsc)`
}
