package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// SecretsError lists the secrets of a sandbox an exec cannot get, each
// with how to fix it.
type SecretsError struct {
	Sandbox  string
	Problems []string
}

func (e *SecretsError) Error() string {
	return fmt.Sprintf("sandbox %q: %s", e.Sandbox, strings.Join(e.Problems, "; "))
}

// Secrets reads a sandbox's secrets on the host, for an exec: from the
// environment, or from a host command the user approved ('sbx apply' lists
// every new or changed command as a widening and asks). A command that was
// not approved never runs. Values are registered with the runner for
// redaction.
func (s *Session) Secrets(ctx context.Context, sp *spec.Spec) (reconcile.Secrets, error) {
	d := s.DesiredOf(sp.Name)
	out := reconcile.Secrets{}
	e := &SecretsError{Sandbox: sp.Name}
	for _, n := range sortedNames(sp.Secrets) {
		sec := sp.Secrets[n]
		switch {
		case sec.Env != "":
			v, ok := s.env.Runner.LookupEnv(sec.Env)
			if !ok || v == "" {
				e.Problems = append(e.Problems, fmt.Sprintf("secret %s: environment variable %s is not set in this shell; export it, or remove the secret from %s if the agent signs in another way", n, sec.Env, sp.Files[0]))
				continue
			}
			out[n] = v
		case len(sec.Command) > 0:
			if !reconcile.CommandApproved(d, n) {
				e.Problems = append(e.Problems, fmt.Sprintf("secret %s: its host command (%s) is not approved on this machine; run 'sbx apply' to review and approve it", n, reconcile.SecretSource(sec)))
				continue
			}
			v, err := hostCommand(ctx, s.env, sec.Command)
			if err != nil {
				e.Problems = append(e.Problems, fmt.Sprintf("secret %s: %v", n, err))
				continue
			}
			out[n] = v
		case sec.File != "":
			if !reconcile.CommandApproved(d, n) {
				e.Problems = append(e.Problems, fmt.Sprintf("secret %s: its host file (%s) is not approved on this machine; run 'sbx apply' to review and approve it", n, sec.File))
				continue
			}
			data, err := untrusted.ReadPath(sec.File, egress.MaxSecretFile)
			if err != nil {
				e.Problems = append(e.Problems, fmt.Sprintf("secret %s: %v", n, err))
				continue
			}
			// Its credentials are registered for redaction one by one
			// (proxySecrets).
			out[n] = string(data)
			continue
		}
		s.env.Runner.Redact(out[n])
	}
	if len(e.Problems) > 0 {
		return nil, e
	}
	if err := s.proxySecrets(ctx, sp, out); err != nil {
		return nil, err
	}
	return out, nil
}

// proxySecrets hands the sandbox's egress proxy the secrets that name
// their hosts, with the sandbox's CA (made on first use, kept in the
// state directory), takes them out of values, and keeps the environment
// the backend gives each exec for them instead (placeholders, trust). A
// backend whose proxy cannot add secrets is an error: the value never
// falls back to the sandbox's env. A backend that was given secrets
// before (the sandbox has a CA) and none now is told so: it holds them
// beyond the exec they were given for, and a secret removed from the file
// must not stay.
func (s *Session) proxySecrets(ctx context.Context, sp *spec.Spec, values reconcile.Secrets) error {
	var names []string
	for _, n := range sortedNames(sp.Secrets) {
		if len(sp.Secrets[n].Hosts) > 0 {
			names = append(names, n)
		}
	}
	sp2, ok := s.Backend.(driver.SecretProxy)
	if len(names) == 0 {
		if _, err := os.Lstat(s.stateDir.CA(s.Backend.Name(), sp.Name)); ok && err == nil {
			return s.keepProxyEnv(ctx, sp2, sp.Name, nil, nil)
		}
		return nil
	}
	if !ok {
		return fmt.Errorf("sandbox %q: the %s driver cannot keep secrets out of the sandbox (secrets.%s.hosts)", sp.Name, s.Backend.Name(), names[0])
	}
	key, err := s.stateDir.ReadKey()
	if err != nil {
		return err
	}
	caPEM, err := state.ReadOrCreate(s.stateDir.CA(s.Backend.Name(), sp.Name), func() ([]byte, error) {
		ca, err := egress.NewCA(sp.Name)
		if err != nil {
			return nil, err
		}
		return ca.MarshalPEM()
	})
	if err != nil {
		return fmt.Errorf("sandbox %q's CA: %v", sp.Name, err)
	}
	agent := spec.AgentOf(sp.Agent)
	var list []driver.ProxySecret
	var proxied []string
	type secretFile struct {
		path string
		data []byte
	}
	var files []secretFile
	for _, n := range names {
		if sec := sp.Secrets[n]; sec.File != "" {
			content, creds, err := fileCredentials([]byte(values[n]), func(k, prefix string) string {
				return reconcile.Key(key).Placeholder(sp.Name, n+"/"+k, prefix)
			})
			if err == nil && len(creds) == 0 {
				err = errors.New("it holds no credential (a string of 16 characters or more)")
			}
			if err != nil {
				return fmt.Errorf("sandbox %q: secret %s: %s: %v", sp.Name, n, sec.File, err)
			}
			for _, c := range creds {
				s.env.Runner.Redact(c.Value)
				list = append(list, driver.ProxySecret{Name: n + "/" + c.Key, Placeholder: c.Placeholder, Value: c.Value, Hosts: sec.Hosts, InFile: sec.Path})
				proxied = append(proxied, c.Value)
			}
			files = append(files, secretFile{sec.Path, content})
			delete(values, n)
			continue
		}
		prefix := ""
		if n == agent.Key {
			prefix = agent.KeyPrefix
		}
		ph := reconcile.Key(key).Placeholder(sp.Name, n, prefix)
		sec := sp.Secrets[n]
		list = append(list, driver.ProxySecret{Name: n, Placeholder: ph, Value: values[n], Hosts: sec.Hosts, Command: sec.Command})
		proxied = append(proxied, values[n])
		delete(values, n)
	}
	if s.proxied == nil {
		s.proxied = map[string][]string{}
	}
	s.proxied[sp.Name] = proxied
	if err := s.keepProxyEnv(ctx, sp2, sp.Name, caPEM, list); err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	fw, ok := s.Backend.(driver.SecretFiles)
	if !ok {
		return fmt.Errorf("sandbox %q: the %s driver cannot put a file secret in the sandbox", sp.Name, s.Backend.Name())
	}
	for _, f := range files {
		if err := fw.WriteSecretFile(ctx, sp.Name, sp.User, f.path, f.data); err != nil {
			return fmt.Errorf("sandbox %q: writing %s: %v", sp.Name, f.path, err)
		}
	}
	return nil
}

// keepProxyEnv hands the backend a sandbox's secrets and keeps the
// environment it gives each exec for them.
func (s *Session) keepProxyEnv(ctx context.Context, p driver.SecretProxy, name string, caPEM []byte, list []driver.ProxySecret) error {
	env, err := p.SetSecrets(ctx, name, caPEM, list)
	if err != nil {
		return err
	}
	if s.proxyEnv == nil {
		s.proxyEnv = map[string]map[string]string{}
	}
	s.proxyEnv[name] = env
	return nil
}

// hostCommand runs an approved secret command on the host (no shell) in
// sbx's environment and returns its trimmed output; the command is not
// traced, its output being the secret.
func hostCommand(ctx context.Context, env driver.Env, argv []string) (string, error) {
	r := &runner.Runner{Env: env.Runner.Env}
	out, err := r.Output(ctx, argv...)
	var re *runner.Error
	if errors.As(err, &re) {
		// Its stderr may echo the secret; say only that it failed.
		return "", fmt.Errorf("%s failed (exit status %d)", runner.Quote(re.Args), re.ExitCode)
	}
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("%s printed nothing", runner.Quote(argv))
	}
	return v, nil
}

// UnsetSecrets says which secrets this shell cannot give the sandboxes:
// apply needs none, but sbx shell and sbx loop pass them to each exec.
func (s *Session) UnsetSecrets() []string {
	var notes []string
	for _, sp := range s.Specs {
		for _, n := range sortedNames(sp.Secrets) {
			if env := sp.Secrets[n].Env; env != "" {
				if v, ok := s.env.Runner.LookupEnv(env); !ok || v == "" {
					notes = append(notes, fmt.Sprintf("secret %s of sandbox %q: %s is not set in this shell; export it before 'sbx shell' or 'sbx loop' (or remove the secret from %s if the agent signs in another way)", n, sp.Name, env, sp.Files[0]))
				}
			}
		}
	}
	return notes
}

// ExecEnv is the environment a command in the sandbox gets through its
// exec: the secrets, the sandbox's env on backends that store none, and
// what the agent documents for running in a sandbox (spec.Agent.Env)
// where the file sets no value of that name.
func (s *Session) ExecEnv(sp *spec.Spec, secrets reconcile.Secrets) map[string]string {
	env := map[string]string{}
	for k, v := range spec.AgentOf(sp.Agent).Env {
		_, inEnv := sp.Env[k]
		_, inSecrets := sp.Secrets[k]
		if !inEnv && !inSecrets {
			env[k] = v
		}
	}
	if pe, ok := s.Backend.(driver.EnvPerExec); ok && pe.EnvPerExec() {
		for k, v := range sp.Env {
			env[k] = v
		}
	}
	for k, v := range secrets {
		env[k] = v
	}
	for k, v := range s.proxyEnv[sp.Name] {
		env[k] = v
	}
	return env
}

// Exec runs argv in a sandbox of the session as sandbox.yaml says: as its
// user, with the env a backend without stored env needs added to o.Env.
func (s *Session) Exec(ctx context.Context, sp *spec.Spec, argv []string, o driver.ExecOptions) (int, error) {
	ex, ok := s.Backend.(driver.Execer)
	if !ok {
		return 0, fmt.Errorf("the %s driver cannot run commands in a sandbox", s.Backend.Name())
	}
	if o.User == "" {
		o.User = sp.User
	}
	return ex.Exec(ctx, sp.Name, argv, o)
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
