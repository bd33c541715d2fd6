package sbx

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/drivertest"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// secretWorld is the fake of Docker's sbx at one version, with sandbox
// "api" created, and the driver on it.
type secretWorld struct {
	self, state string
	env         []string
	argv        func() []string
	trace       bytes.Buffer
}

func newSecretWorld(t *testing.T, version string) *secretWorld {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &secretWorld{self: self, state: filepath.Join(dir, "state.json")}
	log := filepath.Join(dir, "argv.log")
	w.env = []string{fakeEnv + "=sbx", "FAKE_SBX_VERSION=" + version, "FAKE_SBX_STATE=" + w.state, "FAKE_SBX_LOG=" + log,
		"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	w.argv = drivertest.ArgvLog(t, log)
	w.fake(t, "policy", "init", "deny-all")
	w.fake(t, "create", "--name", "api", "shell", dir)
	w.fake(t, "create", "--name", "web", "shell", dir)
	w.argv()
	return w
}

// fake runs the fake directly, as a user would.
func (w *secretWorld) fake(t *testing.T, args ...string) {
	t.Helper()
	if _, err := (&runner.Runner{Env: w.env}).Output(context.Background(), append([]string{w.self}, args...)...); err != nil {
		t.Fatal(err)
	}
}

// driver is the driver on the fake, probed, with extra environment for
// the fake (FAKE_SBX_MUTATE), tracing to w.trace.
func (w *secretWorld) driver(t *testing.T, extra ...string) *Driver {
	t.Helper()
	d := New(Options{Runner: &runner.Runner{Env: append(append([]string(nil), w.env...), extra...), Trace: &w.trace}, Binary: w.self})
	if _, err := d.Identify(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.argv()
	return d
}

// secrets are the fake's stored secrets.
func (w *secretWorld) secrets(t *testing.T) []fakestate.Secret {
	t.Helper()
	var out []fakestate.Secret
	if err := (fakestate.Store{Path: w.state}).View(func(st *fakestate.State) error {
		out = append(out, st.Secrets...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// noInput is the global flag the driver adds to changes at version v.
func noInput(v string) string {
	if v == "0.53.0" {
		return "--no-input "
	}
	return ""
}

// TestSetSecretsService: a secret whose hosts are a service's API domains
// is that service's secret in the sandbox's scope, its value on stdin and
// in no argv, set with -f; the exec gets no variable where Docker's own
// sentinel is (the service's variable), sbx's placeholder otherwise.
func TestSetSecretsService(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			w := newSecretWorld(t, v)
			d := w.driver(t)
			env, err := d.SetSecrets(context.Background(), "api", nil, []driver.ProxySecret{
				{Name: "ANTHROPIC_API_KEY", Placeholder: "sk-ant-api03-sbx-1", Value: "sk-ant-REAL-1", Hosts: []string{"api.anthropic.com"}},
				{Name: "CODEX_API_KEY", Placeholder: "sk-proj-sbx-2", Value: "sk-proj-REAL-2", Hosts: []string{"api.openai.com:443"}, Command: []string{"cat", "key"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"CODEX_API_KEY": "sk-proj-sbx-2"}, env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			want := []string{
				"secret ls --json",
				noInput(v) + "secret set --sandbox api anthropic -f",
				noInput(v) + "secret set --sandbox api openai -f",
				"secret ls --json",
			}
			got := w.argv()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
			wantSecrets := []fakestate.Secret{
				{Scope: "api", Type: "service", Name: "anthropic", SHA256: fakestate.Fingerprint("sk-ant-REAL-1")},
				{Scope: "api", Type: "service", Name: "openai", SHA256: fakestate.Fingerprint("sk-proj-REAL-2")},
			}
			if diff := cmp.Diff(wantSecrets, w.secrets(t)); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
			for _, s := range append(got, w.trace.String()) {
				if strings.Contains(s, "REAL") {
					t.Errorf("a value reached an argv or the trace: %s", s)
				}
			}
			if strings.Contains(w.trace.String(), "secret ls") {
				t.Errorf("the trace shows the secret listing, whose masks keep part of each value:\n%s", w.trace.String())
			}
		})
	}
}

// TestSetSecretsCustomCommand: a secret for other hosts whose value comes
// from an approved command is a custom secret with that command, quoted
// as one shell string, the placeholder sbx chose and every host; the exec
// gets the placeholder.
func TestSetSecretsCustomCommand(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			w := newSecretWorld(t, v)
			d := w.driver(t)
			env, err := d.SetSecrets(context.Background(), "api", nil, []driver.ProxySecret{
				{Name: "NPM_TOKEN", Placeholder: "sbx-0f0f", Value: "npm_REAL it's", Hosts: []string{"npm.pkg.github.com", "registry.example.com"},
					Command: []string{"printf", "%s", "npm_REAL it's"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"NPM_TOKEN": "sbx-0f0f"}, env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			want := []string{
				"secret ls --json",
				noInput(v) + runner.Quote([]string{"secret", "set-custom", "--sandbox", "api", "--host", "npm.pkg.github.com", "--host", "registry.example.com",
					"--env", "NPM_TOKEN", "--placeholder", "sbx-0f0f", "--command", `printf %s 'npm_REAL it'\''s'`}),
				"secret ls --json",
			}
			if diff := cmp.Diff(want, w.argv()); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
			// The fake ran the command through sh, as Docker's sbx does:
			// what it printed is the value.
			wantSecrets := []fakestate.Secret{{Scope: "api", Type: "custom", Name: "NPM_TOKEN", Hosts: []string{"npm.pkg.github.com", "registry.example.com"},
				Placeholder: "sbx-0f0f", SHA256: fakestate.Fingerprint("npm_REAL it's")}}
			if diff := cmp.Diff(wantSecrets, w.secrets(t)); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetSecretsRefusesEnvCustom: a custom secret whose value is in sbx's
// environment could only be given in argv (--value): refused, with what
// to do, before anything changes.
func TestSetSecretsRefusesEnvCustom(t *testing.T) {
	w := newSecretWorld(t, "0.53.0")
	d := w.driver(t)
	_, err := d.SetSecrets(context.Background(), "api", nil, []driver.ProxySecret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: "p1", Value: "sk-ant-REAL", Hosts: []string{"api.anthropic.com"}},
		{Name: "API_KEY", Placeholder: "p2", Value: "REAL-2", Hosts: []string{"api.example.com"}},
		{Name: "MIXED", Placeholder: "p3", Value: "REAL-3", Hosts: []string{"api.anthropic.com", "api.openai.com"}},
	})
	if err == nil {
		t.Fatal("SetSecrets accepted a custom secret from the environment")
	}
	for _, want := range []string{
		`sandbox "api": secret API_KEY: its hosts (api.example.com) are not the API domains of one of Docker's services`,
		"takes a value only as an argument (--value), where every process on this machine can read it; give its value as command:",
		"or use the docker driver",
		"secret MIXED: its hosts (api.anthropic.com, api.openai.com)",
		"anthropic: api.anthropic.com console.anthropic.com claude.ai mcp-proxy.anthropic.com",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "REAL") {
		t.Errorf("the error shows a value: %v", err)
	}
	if got := w.argv(); len(got) != 0 {
		t.Errorf("commands ran: %q", got)
	}
}

// TestSetSecretsOneValuePerService: two secrets for one service cannot
// both be Docker's.
func TestSetSecretsOneValuePerService(t *testing.T) {
	w := newSecretWorld(t, "0.53.0")
	_, err := w.driver(t).SetSecrets(context.Background(), "api", nil, []driver.ProxySecret{
		{Name: "GH_TOKEN", Placeholder: "p1", Value: "a", Hosts: []string{"api.github.com"}},
		{Name: "GITHUB_TOKEN", Placeholder: "p2", Value: "b", Hosts: []string{"github.com"}},
	})
	if err == nil || !strings.Contains(err.Error(), "secrets GH_TOKEN and GITHUB_TOKEN both go to Docker's github service") {
		t.Fatalf("SetSecrets = %v", err)
	}
}

// TestSetSecretsRemovesAndRotates: what the file no longer declares leaves
// the sandbox's scope (a service secret by name, a custom one by its
// placeholder, both with -f), a custom secret whose hosts changed is set
// anew, a new value replaces the old one (-f), and nothing outside the
// sandbox's scope, nor a registry secret in it, is touched.
func TestSetSecretsRemovesAndRotates(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			w := newSecretWorld(t, v)
			ctx := context.Background()
			// The user's own: a global service secret, another
			// sandbox's, a registry secret in this sandbox's scope.
			w.fake(t, "secret", "set", "openai", "-t", "global")
			w.fake(t, "secret", "set", "--sandbox", "web", "anthropic", "-t", "web's")
			w.fake(t, "secret", "set", "--sandbox", "api", "--registry", "ghcr.io", "-t", "reg")
			d := w.driver(t)
			both := []driver.ProxySecret{
				{Name: "ANTHROPIC_API_KEY", Placeholder: "p1", Value: "one", Hosts: []string{"api.anthropic.com"}},
				{Name: "TOKEN", Placeholder: "p2", Value: "tok", Hosts: []string{"a.example.com"}, Command: []string{"echo", "tok"}},
			}
			if _, err := d.SetSecrets(ctx, "api", nil, both); err != nil {
				t.Fatal(err)
			}
			w.argv()

			// Rotation: the same service secret, a new value.
			both[0].Value = "two"
			if _, err := d.SetSecrets(ctx, "api", nil, both); err != nil {
				t.Fatal(err)
			}
			if got := w.secrets(t); got[len(got)-2].Name != "anthropic" || got[len(got)-2].SHA256 != fakestate.Fingerprint("two") {
				t.Errorf("after rotation: %+v", got)
			}
			w.argv()

			// The service secret is gone from the file; the custom one
			// has other hosts.
			env, err := d.SetSecrets(ctx, "api", nil, []driver.ProxySecret{
				{Name: "TOKEN", Placeholder: "p2", Value: "tok", Hosts: []string{"b.example.com"}, Command: []string{"echo", "tok"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"TOKEN": "p2"}, env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			want := []string{
				"secret ls --json",
				noInput(v) + "secret rm --sandbox api anthropic -f",
				noInput(v) + "secret rm --sandbox api --placeholder p2 -f",
				noInput(v) + "secret set-custom --sandbox api --host b.example.com --env TOKEN --placeholder p2 --command 'echo tok'",
				"secret ls --json",
			}
			if diff := cmp.Diff(want, w.argv()); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}

			// None left: the scope holds none of sbx's.
			if _, err := d.SetSecrets(ctx, "api", nil, nil); err != nil {
				t.Fatal(err)
			}
			wantSecrets := []fakestate.Secret{
				{Scope: "", Type: "service", Name: "openai", SHA256: fakestate.Fingerprint("global")},
				{Scope: "web", Type: "service", Name: "anthropic", SHA256: fakestate.Fingerprint("web's")},
				{Scope: "api", Type: "registry", Name: "ghcr.io", SHA256: fakestate.Fingerprint("reg")},
			}
			if diff := cmp.Diff(wantSecrets, w.secrets(t)); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetSecretsVerifies: what `secret ls --json` shows after the changes
// is checked, so a set that did nothing (an overwrite prompt cancelled on
// a closed stdin exits 0, evidence §3.8) or a store that keeps something
// else fails loudly; a listing of an unknown shape is an error, never an
// empty store. Each case starts from the secrets already set, and the
// fake changes every listing as it says.
func TestSetSecretsVerifies(t *testing.T) {
	secrets := []driver.ProxySecret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: "p1", Value: "one", Hosts: []string{"api.anthropic.com"}},
		{Name: "TOKEN", Placeholder: "p2", Value: "tok", Hosts: []string{"a.example.com"}, Command: []string{"echo", "tok"}},
	}
	for _, tc := range []struct{ name, version, mutate, want string }{
		{"service not set", "0.53.0", "secret ls /secrets=[]",
			`sandbox "api": Docker's secret store does not hold what sbx set (sbx secret ls --json): secret ANTHROPIC_API_KEY: the anthropic secret is not there after 'sbx secret set'`},
		// 0.42.0: removing the placeholder the listing shows is no
		// error; the real one stays, and set-custom's overwrite prompt
		// cancels.
		{"other placeholder", "0.42.0", `secret ls /custom_secrets/0/placeholder="sbx-cs-1"`,
			`secret TOKEN: Docker's sbx keeps the placeholder "sbx-cs-1", not the one sbx gave it ("p2")`},
		{"other hosts", "0.53.0", `secret ls /custom_secrets/0/targets=["b.example.com"]`,
			"secret TOKEN: Docker's sbx keeps it for b.example.com, not for the hosts of the file (a.example.com)"},
		// Not in the sandbox's scope as sbx reads it: not removed, so
		// set-custom's overwrite prompt cancels silently (0.47.0 has no
		// --no-input, which makes it an error), and the listing after
		// it says so.
		{"scope word", "0.47.0", `secret ls /custom_secrets/0/scope="sandbox:api"`,
			"secret TOKEN: 0 custom secrets for it after 'sbx secret set-custom', want 1"},
		{"no custom_secrets", "0.53.0", "secret ls /custom_secrets",
			`sbx secret ls --json (sbx 0.53.0): field "custom_secrets": missing`},
		{"targets a string", "0.53.0", `secret ls /custom_secrets/0/targets="a.example.com"`,
			`sbx secret ls --json (sbx 0.53.0): custom secret 1: field "targets": expected an array of strings, got a string`},
		{"no type", "0.53.0", `secret ls /secrets=[{"scope":"api","name":"x"}]`,
			`sbx secret ls --json (sbx 0.53.0): secret 1: field "type": missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSecretWorld(t, tc.version)
			if _, err := w.driver(t).SetSecrets(context.Background(), "api", nil, secrets); err != nil {
				t.Fatal(err)
			}
			d := w.driver(t, "FAKE_SBX_MUTATE="+tc.mutate)
			env, err := d.SetSecrets(context.Background(), "api", nil, secrets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetSecrets = %v, %v\nwant an error with %q", env, err, tc.want)
			}
		})
	}
}

// TestServiceFor: a secret is a service's when every host it names is one
// of the service's API domains (Docker's table), as a plain name on any
// port or 443.
func TestServiceFor(t *testing.T) {
	for _, tc := range []struct {
		hosts []string
		want  string
	}{
		{[]string{"api.anthropic.com"}, "anthropic"},
		{[]string{"API.Anthropic.com:443"}, "anthropic"},
		{[]string{"api.github.com", "github.com"}, "github"},
		{[]string{"api.openai.com", "chatgpt.com"}, "openai"},
		{[]string{"api.anthropic.com:8443"}, ""},
		{[]string{"api.anthropic.com", "api.openai.com"}, ""},
		{[]string{"npm.pkg.github.com"}, ""},
		{[]string{"*.github.com"}, ""},
		{[]string{"1.2.3.4"}, ""},
		{nil, ""},
	} {
		got := ""
		if s := serviceFor(tc.hosts); s != nil {
			got = s.Name
		}
		if got != tc.want {
			t.Errorf("serviceFor(%q) = %q, want %q", tc.hosts, got, tc.want)
		}
	}
}
