package sbx

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/spec"
)

// Secrets that name their hosts (spec.Secret.Hosts) are handed to Docker's
// own credential proxy, in the sandbox's own secret scope (`--sandbox
// NAME`, evidence §3.8): the sandbox holds a placeholder and Docker's
// proxy, on the host, puts the value in requests to those hosts. Two of
// Docker's mechanisms do it (docker/docs
// content/manuals/ai/sandboxes/cli/access/credentials-local.md @f97187764c71,
// "Stored secrets" and "Custom secrets"):
//
//   - a service secret (`sbx secret set --sandbox NAME SERVICE -f`, the
//     value on stdin): Docker writes the service's auth header on requests
//     to the service's API domains, and the sandbox's variable holds a
//     sentinel Docker sets ("proxy-managed");
//   - a custom secret (`sbx secret set-custom --sandbox NAME --host H…
//     --env VAR --placeholder P (--value|--ref|--command)`): Docker
//     replaces the placeholder wherever it appears in requests to the
//     hosts. Its value can only be given in argv (--value), as a secret
//     reference (--ref), or as a host command Docker runs itself
//     (--command); sbx never puts a value in argv, so a custom secret must
//     come from an approved command.
//
// The sandbox's own scope holds exactly the secrets with hosts its file
// declares: before each exec (session.proxySecrets) every built-in
// service's and every custom secret in that scope that the file does not
// declare is removed, so removing a secret from the file, or changing its
// hosts, takes effect without recreating the sandbox. A secret set there
// by hand (`sbx secret set --sandbox NAME …`) is removed too; a global one
// is never touched. Registry secrets and services only kits declare are
// not sbx's to manage and are left alone.
//
// The sandbox's CA (caPEM) is not used on this backend: Docker's proxy
// terminates TLS with its own CA, which its sandboxes already trust.

var (
	_ driver.SecretProxy = (*Driver)(nil)
)

// service is one of Docker's built-in secret services.
type service struct {
	Name string
	// Env are the variables `sbx secret import` reads for the service on
	// the host; the sandbox's own variable of the same name holds
	// Docker's sentinel (the built-in agents' kits declare it), which an
	// exec must not replace.
	Env []string
	// Hosts are the API domains Docker's proxy injects the service's
	// secret into: all of them, whichever of them a secret names.
	Hosts []string
}

// services is Docker's table of built-in services, with the environment
// variables and API domains of each, from docker/docs
// content/manuals/ai/sandboxes/cli/access/credentials-local.md
// @f97187764c71e3995bc2f6fd75e32f002c87f0b2, "Built-in services". The
// service names are also those of evidence §3.8 (v0.38.0). The evidence
// does not say which domains a release before those docs covered.
var services = []service{
	{"anthropic", []string{"ANTHROPIC_API_KEY"}, []string{"api.anthropic.com", "console.anthropic.com", "claude.ai", "mcp-proxy.anthropic.com"}},
	{"cursor", []string{"CURSOR_API_KEY"}, []string{"api2.cursor.sh", "api3.cursor.sh", "repo42.cursor.sh", "cursor.com"}},
	{"droid", []string{"FACTORY_API_KEY"}, []string{"api.factory.ai", "app.factory.ai", "relay.factory.ai"}},
	{"github", []string{"GH_TOKEN", "GITHUB_TOKEN"}, []string{"api.github.com", "github.com", "raw.githubusercontent.com", "gist.github.com", "copilot.github.com", "api.githubcopilot.com"}},
	{"google", []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, []string{"generativelanguage.googleapis.com", "oauth2.googleapis.com", "aiplatform.googleapis.com", "vertexai.googleapis.com"}},
	{"groq", []string{"GROQ_API_KEY"}, []string{"api.groq.com"}},
	{"mistral", []string{"MISTRAL_API_KEY"}, []string{"api.mistral.ai"}},
	{"nebius", []string{"NEBIUS_API_KEY"}, []string{"api.studio.nebius.com", "api.tokenfactory.nebius.com"}},
	{"openai", []string{"OPENAI_API_KEY"}, []string{"api.openai.com", "openai.com", "chatgpt.com", "www.chatgpt.com"}},
	{"openrouter", []string{"OPENROUTER_API_KEY"}, []string{"openrouter.ai"}},
	{"xai", []string{"XAI_API_KEY"}, []string{"api.x.ai"}},
}

// serviceFor is the built-in service whose API domains include every one
// of hosts (each a plain name, on port 443 or any port), or nil. Docker
// then also sends the value to the service's other domains, all the
// provider's own.
func serviceFor(hosts []string) *service {
	if len(hosts) == 0 {
		return nil
	}
	for i := range services {
		s := &services[i]
		all := true
		for _, h := range hosts {
			ph, err := spec.ParseHost(h)
			if err != nil || ph.Wildcard || ph.IP.IsValid() || (ph.Port != 0 && ph.Port != 443) || !slices.Contains(s.Hosts, ph.Name) {
				all = false
				break
			}
		}
		if all {
			return s
		}
	}
	return nil
}

// secretPlan is what SetSecrets does with the secrets it is given.
type secretPlan struct {
	services map[string]driver.ProxySecret // by service name
	custom   []driver.ProxySecret
	env      map[string]string
}

// planSecrets sorts secrets into service and custom secrets, and refuses,
// all at once, those Docker's sbx cannot take without a value in argv.
func planSecrets(name string, secrets []driver.ProxySecret) (*secretPlan, error) {
	p := &secretPlan{services: map[string]driver.ProxySecret{}, env: map[string]string{}}
	var problems []string
	by := map[string]string{}
	for _, s := range secrets {
		if s.InFile != "" {
			problems = append(problems, fmt.Sprintf("secret %s: the sbx backend's proxy takes one value per secret, not a file of credentials (%s)", s.Name, s.InFile))
			continue
		}
		if svc := serviceFor(s.Hosts); svc != nil {
			if other, dup := by[svc.Name]; dup {
				problems = append(problems, fmt.Sprintf("secrets %s and %s both go to Docker's %s service (its hosts %s), which holds one value per sandbox: declare one of them", other, s.Name, svc.Name, strings.Join(svc.Hosts, ", ")))
				continue
			}
			by[svc.Name] = s.Name
			p.services[svc.Name] = s
			if !slices.Contains(svc.Env, s.Name) {
				// Docker's sentinel is in the service's own variables;
				// a secret of another name gets sbx's placeholder,
				// which Docker's proxy overwrites with the header.
				p.env[s.Name] = s.Placeholder
			}
			continue
		}
		switch {
		case len(s.Command) == 0:
			problems = append(problems, fmt.Sprintf("secret %s: its hosts (%s) are not the API domains of one of Docker's services, so the sbx driver hands it to Docker's sbx as a custom secret ('sbx secret set-custom'), which takes a value only as an argument (--value), where every process on this machine can read it; give its value as command: (Docker's sbx then runs that approved command itself), limit its hosts to one service's domains (%s), or use the docker driver", s.Name, strings.Join(s.Hosts, ", "), serviceDomains()))
		case runtime.GOOS == "windows":
			// Docker's sbx runs --command "through the host shell";
			// how to quote for the Windows shells it may use is not
			// documented.
			problems = append(problems, fmt.Sprintf("secret %s: the sbx driver cannot yet hand Docker's sbx a host command on Windows (how it quotes --command there is not documented); limit its hosts to one service's domains (%s), or use the docker driver", s.Name, serviceDomains()))
		default:
			p.custom = append(p.custom, s)
			p.env[s.Name] = s.Placeholder
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("sandbox %q: %s", name, strings.Join(problems, "; "))
	}
	return p, nil
}

// serviceDomains lists each service's domains, for messages.
func serviceDomains() string {
	var parts []string
	for _, s := range services {
		parts = append(parts, s.Name+": "+strings.Join(s.Hosts, " "))
	}
	return strings.Join(parts, "; ")
}

// SetSecrets makes the sandbox's own scope in Docker's secret store hold
// exactly secrets: it removes what the file no longer declares, sets each
// service secret with its value on stdin (never argv) and -f, so that the
// overwrite prompt, which on a closed stdin cancels silently with exit 0
// (evidence §3.8), is never asked, and sets each custom secret anew after
// removing the one it replaces (set-custom has no -f in the evidence).
// Then it lists the store again and fails unless it holds exactly what
// was set. The env it returns holds placeholders only: for custom secrets
// (Docker sets the variable only in sandboxes created after the secret;
// an existing one needs it in each exec, credentials-local.md, "Install
// npm packages from GitHub Packages") and for service secrets under a
// name other than the service's own. caPEM is not used (Docker's proxy
// has its own CA).
func (d *Driver) SetSecrets(ctx context.Context, name string, caPEM []byte, secrets []driver.ProxySecret) (map[string]string, error) {
	p, err := planSecrets(name, secrets)
	if err != nil {
		return nil, err
	}
	before, err := d.listSecrets(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range before.Secrets {
		if _, keep := p.services[s.Name]; s.Scope == name && s.Type == "service" && builtIn(s.Name) && !keep {
			if err := d.call(true, "secret", "rm", "--sandbox", name, s.Name, "-f").Run(ctx); err != nil {
				return nil, fmt.Errorf("removing the %s secret of sandbox %q: %w", s.Name, name, err)
			}
		}
	}
	for _, c := range before.Custom {
		if c.Scope == name {
			if err := d.call(true, "secret", "rm", "--sandbox", name, "--placeholder", c.Placeholder, "-f").Run(ctx); err != nil {
				return nil, fmt.Errorf("removing the custom secret %s of sandbox %q: %w", c.Env, name, err)
			}
		}
	}
	for _, svc := range sortedKeys(p.services) {
		s := p.services[svc]
		args := d.changeArgs("secret", "set", "--sandbox", name, svc, "-f")
		// As `echo "$KEY" | sbx secret set anthropic` (credentials-local.md,
		// "Store a secret").
		if err := d.opts.Runner.Run(ctx, runner.Cmd{Args: d.cli.Cmd(args...), Stdin: strings.NewReader(s.Value + "\n")}); err != nil {
			return nil, fmt.Errorf("handing secret %s of sandbox %q to Docker's %s service: %w", s.Name, name, svc, err)
		}
	}
	for _, s := range p.custom {
		args := []string{"secret", "set-custom", "--sandbox", name}
		for _, h := range s.Hosts {
			args = append(args, "--host", h)
		}
		// "sbx runs the command through the host shell and trims its
		// output" (credentials-local.md, "Use a dynamic secret source"):
		// one string, quoted for a POSIX shell.
		args = append(args, "--env", s.Name, "--placeholder", s.Placeholder, "--command", runner.Quote(s.Command))
		if err := d.call(true, args...).Run(ctx); err != nil {
			return nil, fmt.Errorf("handing secret %s of sandbox %q to Docker's sbx: %w", s.Name, name, err)
		}
	}
	after, err := d.listSecrets(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.check(name, after); err != nil {
		return nil, err
	}
	return p.env, nil
}

// check compares the sandbox's scope in a listing with the plan.
func (p *secretPlan) check(name string, l secretList) error {
	var problems []string
	seen := map[string]bool{}
	for _, s := range l.Secrets {
		if s.Scope != name || s.Type != "service" || !builtIn(s.Name) {
			continue
		}
		seen[s.Name] = true
		if _, ok := p.services[s.Name]; !ok {
			problems = append(problems, fmt.Sprintf("the %s secret is still there after 'sbx secret rm'", s.Name))
		}
	}
	for _, svc := range sortedKeys(p.services) {
		if !seen[svc] {
			problems = append(problems, fmt.Sprintf("secret %s: the %s secret is not there after 'sbx secret set' (was it asked to overwrite one, and cancelled?)", p.services[svc].Name, svc))
		}
	}
	custom := map[string][]customSecret{}
	for _, c := range l.Custom {
		if c.Scope == name {
			custom[c.Env] = append(custom[c.Env], c)
		}
	}
	for _, s := range p.custom {
		got := custom[s.Name]
		delete(custom, s.Name)
		switch {
		case len(got) != 1:
			problems = append(problems, fmt.Sprintf("secret %s: %d custom secrets for it after 'sbx secret set-custom', want 1", s.Name, len(got)))
		case got[0].Placeholder != s.Placeholder:
			problems = append(problems, fmt.Sprintf("secret %s: Docker's sbx keeps the placeholder %q, not the one sbx gave it (%q)", s.Name, got[0].Placeholder, s.Placeholder))
		case !sameHosts(got[0].Targets, s.Hosts):
			problems = append(problems, fmt.Sprintf("secret %s: Docker's sbx keeps it for %s, not for the hosts of the file (%s)", s.Name, strings.Join(got[0].Targets, ", "), strings.Join(s.Hosts, ", ")))
		}
	}
	for _, env := range sortedKeys(custom) {
		problems = append(problems, fmt.Sprintf("the custom secret %s is still there after 'sbx secret rm'", env))
	}
	if len(problems) > 0 {
		return fmt.Errorf("sandbox %q: Docker's secret store does not hold what sbx set (sbx secret ls --json): %s", name, strings.Join(problems, "; "))
	}
	return nil
}

// listSecrets reads `sbx secret ls --json` without tracing it: the listing
// masks each value but keeps some of its first and last characters
// ("gho_GCaw4o****...****43qy", docker-sandboxes-cli.md §2.10), which no
// trace may hold.
func (d *Driver) listSecrets(ctx context.Context) (secretList, error) {
	args := []string{"secret", "ls", "--json"}
	r := &runner.Runner{Env: d.opts.Runner.Env}
	out, err := r.Output(ctx, d.cli.Cmd(args...)...)
	if err != nil {
		return secretList{}, err
	}
	return parseSecrets(d.cli.Source(ctx, args...), out)
}

// changeArgs are the arguments of a command that changes something, with
// --no-input where the CLI has it (call).
func (d *Driver) changeArgs(args ...string) []string {
	if d.noInput {
		return append([]string{"--no-input"}, args...)
	}
	return args
}

func builtIn(name string) bool {
	return slices.ContainsFunc(services, func(s service) bool { return s.Name == name })
}

func sameHosts(a, b []string) bool {
	norm := func(l []string) []string {
		out := make([]string, len(l))
		for i, h := range l {
			out[i] = strings.ToLower(h)
		}
		sort.Strings(out)
		return out
	}
	return slices.Equal(norm(a), norm(b))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
