package reconcile

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestWidenings plays the hostile agent's edits to its own declaration (and
// a user's ordinary ones): each widening is found, named with its origin,
// and marked when the file is one the sandbox could have written; changes
// that only narrow what the sandbox may do are not widenings.
func TestWidenings(t *testing.T) {
	local := spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 3, Col: 5}
	home := spec.Origin{File: "/home/u/agents/api.yaml", Path: "/home/u/agents/api.yaml", Line: 7, Col: 3}
	from := func(path string, o spec.Origin) func(sb *spec.Spec) {
		return func(sb *spec.Spec) {
			if sb.Origins == nil {
				sb.Origins = map[string]spec.Origin{}
			}
			sb.Origins[path] = o
		}
	}
	tests := []struct {
		name     string
		caps     Caps
		approved func(sb *spec.Spec) // nil: as baseSpec; noApproval: none
		none     bool                // nothing approved yet
		want     []func(sb *spec.Spec)
		widens   []Widening
	}{
		{
			name:   "unchanged",
			caps:   sbxCaps(),
			widens: nil,
		},
		{
			name:     "root instead of the approved user, from the local file",
			caps:     dockerCaps(),
			approved: func(sb *spec.Spec) { sb.User = "1000:1000" },
			want:     []func(*spec.Spec){func(sb *spec.Spec) { sb.User = "0:0" }, from("user", local)},
			widens:   []Widening{{Path: "user", What: "runs as root instead of 1000:1000", Origin: local.String(), FromSandbox: true}},
		},
		{
			name:     "the template's user instead of the approved one",
			caps:     sbxCaps(),
			approved: func(sb *spec.Spec) { sb.User = "node" },
			want:     []func(*spec.Spec){func(sb *spec.Spec) { sb.User = "" }},
			widens:   []Widening{{Path: "user", What: "runs as the template's own user instead of node (root for most images)"}},
		},
		{
			name:     "a user instead of root narrows",
			caps:     dockerCaps(),
			approved: func(sb *spec.Spec) { sb.User = "root" },
			want:     []func(*spec.Spec){func(sb *spec.Spec) { sb.User = "1000" }},
		},
		{
			name: "a host mount from the local file",
			caps: sbxCaps(),
			want: []func(*spec.Spec){
				func(sb *spec.Spec) { sb.Mounts = []spec.Mount{{Source: "/", Target: "/hostroot", ReadOnly: true}} },
				from("mounts[0]", local),
			},
			widens: []Widening{{Path: "mounts[0]", What: "host path / mounted at /hostroot, read-only", Origin: "sandbox.local.yaml:3:5", FromSandbox: true}},
		},
		{
			name: "a mount made writable",
			caps: sbxCaps(),
			approved: func(sb *spec.Spec) {
				sb.Mounts = []spec.Mount{{Source: "/data", Target: "/data", ReadOnly: true}}
			},
			want: []func(*spec.Spec){
				func(sb *spec.Spec) { sb.Mounts = []spec.Mount{{Source: "/data", Target: "/data"}} },
				from("mounts[0]", home),
			},
			widens: []Widening{{Path: "mounts[0]", What: "host path /data mounted at /data, read-write", Origin: "/home/u/agents/api.yaml:7:3"}},
		},
		{
			name: "a mount removed narrows",
			caps: sbxCaps(),
			approved: func(sb *spec.Spec) {
				sb.Mounts = []spec.Mount{{Source: "/data", Target: "/data"}}
			},
		},
		{
			name: "egress: allow, preset, policy, deny and ranges",
			caps: dockerCaps(),
			want: []func(*spec.Spec){
				func(sb *spec.Spec) {
					sb.Network.Allow = append(sb.Network.Allow, "pastebin.example")
					sb.Network.Presets = []string{"pypi"}
					sb.Network.Policy = "allow"
					sb.Network.Deny = nil
					sb.Network.BlockCIDRs = nil
				},
				from("network.allow[1]", spec.Origin{File: "sandbox.yaml", Path: "/src/api/sandbox.yaml", Line: 9, Col: 22, Value: "pastebin.example"}),
				from("network.presets[0]", spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 2, Col: 14, Value: "pypi"}),
			},
			approved: func(sb *spec.Spec) {
				sb.Network.BlockCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
				sb.Declarations = []spec.Declaration{{Path: "/src/api/sandbox.yaml"}}
			},
			widens: []Widening{
				{Path: "network.allow", What: "egress to pastebin.example", Origin: "sandbox.yaml:9:22"},
				{Path: "network.blockCIDRs", What: "may reach 10.0.0.0/8 (no longer in blockCIDRs)"},
				{Path: "network.deny", What: "no longer denies pastebin.com"},
				{Path: "network.policy", What: "network.policy allow: the sandbox may reach any host"},
				{Path: "network.presets", What: "egress to files.pythonhosted.org (preset pypi)", Origin: "sandbox.local.yaml:2:14"},
				{Path: "network.presets", What: "egress to pypi.org (preset pypi)", Origin: "sandbox.local.yaml:2:14"},
			},
		},
		{
			// The hostile agent's sandbox.local.yaml reaches for private
			// addresses without touching blockCIDRs: an exact address,
			// and a Docker network whose containers it may then name.
			name: "a private address and a Docker network, from the local file",
			caps: dockerCaps(),
			approved: func(sb *spec.Spec) {
				sb.Network.BlockCIDRs = []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("fc00::/7")}
			},
			want: []func(*spec.Spec){
				func(sb *spec.Spec) {
					sb.Network.Allow = append(sb.Network.Allow, "172.18.0.5:4000", "fd00::1", "litellm:4000")
					sb.Docker.Networks = []string{"llm"}
				},
				from("network.allow[1]", spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 3, Col: 12, Value: "172.18.0.5:4000"}),
				from("network.allow[2]", spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 3, Col: 31, Value: "fd00::1"}),
				from("network.allow[3]", spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 3, Col: 42, Value: "litellm:4000"}),
				from("docker.networks[0]", spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 5, Col: 14, Value: "llm"}),
			},
			widens: []Widening{
				{Path: "docker.networks", What: "the egress proxy joins Docker network llm: the sandbox may reach the private addresses of its containers that network.allow allows", Origin: "sandbox.local.yaml:5:14", FromSandbox: true},
				{Path: "network.allow", What: "egress to 172.18.0.5:4000, a private address: an exception to blocked range 172.16.0.0/12", Origin: "sandbox.local.yaml:3:12", FromSandbox: true},
				{Path: "network.allow", What: "egress to fd00::1, a private address: an exception to blocked range fc00::/7", Origin: "sandbox.local.yaml:3:31", FromSandbox: true},
				{Path: "network.allow", What: "egress to litellm:4000", Origin: "sandbox.local.yaml:3:42", FromSandbox: true},
			},
		},
		{
			name:     "a Docker network left narrows",
			caps:     dockerCaps(),
			approved: func(sb *spec.Spec) { sb.Docker.Networks = []string{"llm", "lan"} },
			want:     []func(*spec.Spec){func(sb *spec.Spec) { sb.Docker.Networks = []string{"llm"} }},
		},
		{
			name: "Docker networks mean nothing on sbx",
			caps: sbxCaps(),
			want: []func(*spec.Spec){func(sb *spec.Spec) { sb.Docker.Networks = []string{"llm"} }},
		},
		{
			// The docker driver keeps the approved sandbox's declaration
			// read-only inside it: its files were not written by the
			// sandbox. A new layer in the workspace could have been.
			name: "protected declaration is not from the sandbox",
			caps: dockerCaps(),
			approved: func(sb *spec.Spec) {
				sb.Declarations = []spec.Declaration{{Path: "/src/api/sandbox.yaml"}}
			},
			want: []func(*spec.Spec){
				func(sb *spec.Spec) {
					sb.Mounts = []spec.Mount{{Source: "/etc", Target: "/hostetc"}, {Source: "/var", Target: "/hostvar"}}
				},
				from("mounts[0]", local),
				from("mounts[1]", spec.Origin{File: "extra.yaml", Path: "/src/api/extra.yaml", Line: 1, Col: 9}),
			},
			widens: []Widening{
				{Path: "mounts[0]", What: "host path /etc mounted at /hostetc, read-write", Origin: "sandbox.local.yaml:3:5"},
				{Path: "mounts[1]", What: "host path /var mounted at /hostvar, read-write", Origin: "extra.yaml:1:9", FromSandbox: true},
			},
		},
		{
			name: "secrets: a new host command, a changed one, a host variable",
			caps: sbxCaps(),
			want: []func(*spec.Spec){
				func(sb *spec.Spec) {
					sb.Secrets["GITHUB_TOKEN"] = spec.Secret{Command: []string{"sh", "-c", "cat ~/.ssh/id_ed25519"}}
					sb.Secrets["AWS"] = spec.Secret{Env: "AWS_SECRET_ACCESS_KEY"}
				},
				from("secrets.GITHUB_TOKEN", local),
			},
			widens: []Widening{
				{Path: "secrets.AWS", What: "secret AWS passes host environment variable AWS_SECRET_ACCESS_KEY into the sandbox"},
				{Path: "secrets.GITHUB_TOKEN", What: "secret GITHUB_TOKEN runs a command on this machine: sh -c 'cat ~/.ssh/id_ed25519'", Origin: "sandbox.local.yaml:3:5", FromSandbox: true},
			},
		},
		{
			// A file of credentials is read on the host: approved like a
			// host command, on the first apply too.
			name: "secrets: a host file",
			caps: sbxCaps(),
			none: true,
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Secrets["CODEX_AUTH"] = spec.Secret{File: "/home/u/.codex/auth.json", Path: "/home/agent/.codex/auth.json", Hosts: []string{"api.openai.com"}}
			}},
			widens: []Widening{
				{Path: "secrets.CODEX_AUTH", What: "secret CODEX_AUTH reads host file /home/u/.codex/auth.json and sends the credentials in it to api.openai.com"},
				{Path: "secrets.GITHUB_TOKEN", What: "secret GITHUB_TOKEN runs a command on this machine: gh auth token"},
			},
		},
		{
			// Keeping a secret out of the sandbox narrows; letting it in,
			// or sending it to one more host, widens.
			name: "secrets: hosts",
			caps: sbxCaps(),
			approved: func(sb *spec.Spec) {
				sb.Secrets["KEY"] = spec.Secret{Env: "KEY", Hosts: []string{"api.example.com"}}
				sb.Secrets["TOKEN"] = spec.Secret{Env: "TOKEN", Hosts: []string{"api.example.com"}}
				sb.Secrets["NARROW"] = spec.Secret{Env: "NARROW"}
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Secrets["KEY"] = spec.Secret{Env: "KEY"}
				sb.Secrets["TOKEN"] = spec.Secret{Env: "TOKEN", Hosts: []string{"api.example.com", "uploads.example.com"}}
				sb.Secrets["NARROW"] = spec.Secret{Env: "NARROW", Hosts: []string{"api.example.com"}}
			}},
			widens: []Widening{
				{Path: "secrets.KEY.hosts", What: "secret KEY is no longer kept out of the sandbox: the agent can read its value and send it anywhere it reaches"},
				{Path: "secrets.TOKEN.hosts", What: "secret TOKEN may now be sent to uploads.example.com"},
			},
		},
		{
			// Nothing approved yet (first apply on this machine): only a
			// host command needs approval.
			name: "first apply: only host commands",
			caps: sbxCaps(),
			none: true,
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Mounts = []spec.Mount{{Source: "/data", Target: "/data"}}
				sb.Secrets["AWS"] = spec.Secret{Env: "AWS_SECRET_ACCESS_KEY"}
			}},
			widens: []Widening{{Path: "secrets.GITHUB_TOKEN", What: "secret GITHUB_TOKEN runs a command on this machine: gh auth token"}},
		},
		{
			name: "host variables in env",
			caps: sbxCaps(),
			approved: func(sb *spec.Spec) {
				sb.HostVars = map[string][]string{"env.DATABASE_URL": {"DATABASE_URL"}}
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.HostVars = map[string][]string{"env.DATABASE_URL": {"DATABASE_URL"}, "env.X": {"AWS_SECRET_ACCESS_KEY", "HOME"}}
			}},
			widens: []Widening{{Path: "env.X", What: "env.X reads host environment variables AWS_SECRET_ACCESS_KEY, HOME"}},
		},
		{
			name: "docker safeguards dropped",
			caps: dockerCaps(),
			approved: func(sb *spec.Spec) {
				sb.Docker.Runtime = "runsc"
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Docker = spec.Docker{}
				sb.Protect = false
				sb.Workspace.ReadOnly = false
			}},
			widens: []Widening{
				{Path: "docker.noNewPrivileges", What: "setuid programs may raise privileges inside the sandbox (docker.noNewPrivileges false)"},
				{Path: "docker.runtime", What: "runtime runc instead of gVisor (runsc)"},
				{Path: "workspace.protect", What: "the sandbox may rewrite its own declaration and write the host's .git, whose config and hooks git runs on your side (workspace.protect false)"},
			},
		},
		{
			name: "docker safeguards mean nothing on sbx",
			caps: sbxCaps(),
			approved: func(sb *spec.Spec) {
				sb.Docker.Runtime = "runsc"
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) { sb.Docker = spec.Docker{}; sb.Protect = false }},
		},
		{
			name: "gVisor added narrows",
			caps: dockerCaps(),
			want: []func(*spec.Spec){func(sb *spec.Spec) { sb.Docker.Runtime = "runsc" }},
		},
		{
			name: "workspace made writable, template and build network",
			caps: dockerCaps(),
			approved: func(sb *spec.Spec) {
				sb.Workspace.ReadOnly = true
				sb.Template = spec.Template{Build: &spec.Build{Context: "/src/api/.sandbox", Dockerfile: "Dockerfile"}}
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Workspace.ReadOnly = false
				sb.Template = spec.Template{Build: &spec.Build{Context: "/src/api/.sandbox", Dockerfile: "Dockerfile", Network: true}}
			}},
			widens: []Widening{
				{Path: "template.build.network", What: "the template build gets the Docker daemon's network"},
				{Path: "workspace.readOnly", What: "workspace /src/api becomes writable"},
			},
		},
		{
			name: "another template image",
			caps: sbxCaps(),
			want: []func(*spec.Spec){func(sb *spec.Spec) { sb.Template.Image = "evil/agent:latest" }},
			widens: []Widening{
				{Path: "template", What: "template image evil/agent:latest"},
			},
		},
		{
			name: "higher limits and a published port",
			caps: sbxCaps(),
			approved: func(sb *spec.Spec) {
				sb.Resources = spec.Resources{CPUs: 2, Memory: 4 << 30}
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Resources = spec.Resources{CPUs: 1, Memory: 16 << 30}
				sb.Ports = []spec.Port{{ContainerPort: 3000, Protocol: "tcp"}, {HostIP: "0.0.0.0", HostPort: 8080, ContainerPort: 8080, Protocol: "tcp"},
					{HostIP: "127.0.0.1", HostPort: 9090, ContainerPort: 9090, Protocol: "tcp"}}
			}},
			widens: []Widening{
				{Path: "ports[0]", What: "publishes sandbox port 3000/tcp on the host's loopback"},
				{Path: "ports[1]", What: "publishes sandbox port 0.0.0.0:8080:8080/tcp on host address 0.0.0.0, reachable from other machines"},
				{Path: "ports[2]", What: "publishes sandbox port 127.0.0.1:9090:9090/tcp on the host's loopback"},
				{Path: "resources.memory", What: "memory limit 4g → 16g"},
			},
		},
		{
			name: "a host port and a service, from the local file",
			caps: withServices(dockerCaps()),
			approved: func(sb *spec.Spec) {
				sb.Network.HostPorts = []int{11434}
				sb.Services = map[string]spec.Service{"db": {Image: "postgres:16", Ports: []int{5432}}}
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Network.HostPorts = []int{11434, 22}
				sb.Services = map[string]spec.Service{"db": {Image: "evil/postgres:16", Ports: []int{5432}}, "cache": {Image: "redis:7", Ports: []int{6379}, Egress: true}}
			}, from("network.hostPorts[1]", local), from("services.db", local)},
			widens: []Widening{
				{Path: "network.hostPorts[1]", What: "reaches port 22 on the host's loopback (as host.docker.internal:22)", Origin: local.String(), FromSandbox: true},
				{Path: "services.cache", What: "runs service image redis:7"},
				{Path: "services.cache.egress", What: "service cache reaches what the sandbox's policy allows"},
				{Path: "services.db", What: "runs service image evil/postgres:16", Origin: local.String(), FromSandbox: true},
			},
		},
		{
			name: "a service made a Docker daemon, from the local file",
			caps: withServices(dockerCaps()),
			approved: func(sb *spec.Spec) {
				sb.Services = map[string]spec.Service{"docker": {Image: "docker:28-dind", Ports: []int{2375}}}
			},
			want: []func(*spec.Spec){func(sb *spec.Spec) {
				sb.Services = map[string]spec.Service{"docker": {Image: "docker:28-dind", Ports: []int{2375}, Dockerd: true}}
			}, from("services.docker.dockerd", local)},
			widens: []Widening{
				{Path: "services.docker.dockerd", What: "gives the agent a Docker daemon (service docker), under gVisor", Origin: local.String(), FromSandbox: true},
			},
		},
		{
			name:     "fewer host ports and the same services narrow",
			caps:     withServices(dockerCaps()),
			approved: func(sb *spec.Spec) { sb.Network.HostPorts = []int{11434, 8811} },
			want:     []func(*spec.Spec){func(sb *spec.Spec) { sb.Network.HostPorts = []int{8811} }},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := baseSpec()
			if tc.approved != nil {
				tc.approved(base)
			}
			want := baseSpec()
			if tc.approved != nil {
				tc.approved(want)
			}
			for _, f := range tc.want {
				f(want)
			}
			d := desiredOf(t, want)
			if !tc.none {
				d.Approved = recordOf(t, tc.caps, base)
			}
			if diff := cmp.Diff(tc.widens, widenings(d, tc.caps, false)); diff != "" {
				t.Errorf("widenings (-want +got):\n%s", diff)
			}
		})
	}
}

// withServices adds the docker driver's rows for network.hostPorts and
// services to a test table.
func withServices(c Caps) Caps {
	c.Fields = maps.Clone(c.Fields)
	c.Fields[FieldHostPorts] = InPlaceCap("the relay is made again", true)
	c.Fields[FieldServices] = ReplaceCap("docker", "services", false)
	return c
}

// TestCommandApproved: a host command runs only when it is exactly the one
// the user last approved.
func TestCommandApproved(t *testing.T) {
	approved := recordOf(t, sbxCaps(), baseSpec())
	d := desiredOf(t, baseSpec())
	if CommandApproved(d, "GITHUB_TOKEN") {
		t.Error("approved without any approval on record")
	}
	d.Approved = approved
	if !CommandApproved(d, "GITHUB_TOKEN") {
		t.Error("the applied command is not approved")
	}
	changed := baseSpec()
	changed.Secrets["GITHUB_TOKEN"] = spec.Secret{Command: []string{"gh", "auth", "token", "--hostname", "evil.example"}}
	d = desiredOf(t, changed)
	d.Approved = approved
	if CommandApproved(d, "GITHUB_TOKEN") {
		t.Error("a changed command is approved")
	}
	renamed := baseSpec()
	renamed.Secrets["OTHER"] = renamed.Secrets["GITHUB_TOKEN"]
	d = desiredOf(t, renamed)
	d.Approved = approved
	if CommandApproved(d, "OTHER") {
		t.Error("a command approved for another secret is approved")
	}
	// A host file is read only as approved: the same file, to the same
	// place in the sandbox.
	withFile := func(file, path string) *spec.Spec {
		sb := baseSpec()
		sb.Secrets["AUTH"] = spec.Secret{File: file, Path: path, Hosts: []string{"api.openai.com"}}
		return sb
	}
	approvedFile := recordOf(t, sbxCaps(), withFile("/home/u/.codex/auth.json", "/home/agent/.codex/auth.json"))
	for _, tc := range []struct {
		file, path string
		want       bool
	}{
		{"/home/u/.codex/auth.json", "/home/agent/.codex/auth.json", true},
		{"/home/u/.ssh/id_ed25519", "/home/agent/.codex/auth.json", false},
		{"/home/u/.codex/auth.json", "/workspace/auth.json", false},
	} {
		d = desiredOf(t, withFile(tc.file, tc.path))
		if CommandApproved(d, "AUTH") {
			t.Errorf("%s: approved without any approval on record", tc.file)
		}
		d.Approved = approvedFile
		if got := CommandApproved(d, "AUTH"); got != tc.want {
			t.Errorf("file %s at %s: approved %v, want %v", tc.file, tc.path, got, tc.want)
		}
	}
}

// TestSecretShown: a plan says, per secret, where its value can go, and
// for a secret that names its hosts, how the backend keeps it out.
func TestSecretShown(t *testing.T) {
	pl := &planner{caps: sbxCaps(), sb: &spec.Spec{}}
	pl.caps.Fields = maps.Clone(pl.caps.Fields)
	pl.caps.Fields[FieldSecretHosts] = ProxySecretsCap("the proxy adds it")
	pl.caps.Fields[FieldSecretFiles] = ProxySecretsCap("the helper writes the copy")
	for s, want := range map[*spec.Secret]string{
		{Env: "GH_TOKEN"}: "env GH_TOKEN; readable by the agent",
		{Command: []string{"gh", "auth", "token"}, Hosts: []string{"api.github.com", "github.com"}}:                 "command gh auth token; sent only to api.github.com, github.com: the proxy adds it",
		{File: "/home/u/.codex/auth.json", Path: "/home/agent/.codex/auth.json", Hosts: []string{"api.openai.com"}}: "file /home/u/.codex/auth.json at /home/agent/.codex/auth.json; sent only to api.openai.com: the helper writes the copy",
	} {
		if got := pl.secretShown(*s); got != want {
			t.Errorf("secretShown(%+v) = %q, want %q", *s, got, want)
		}
	}
}
