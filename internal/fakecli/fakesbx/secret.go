package fakesbx

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// services are the secret services of docker-sandboxes-cli.md §1.3 secret
// (newest list).
var services = []string{"anthropic", "cursor", "droid", "github", "google", "groq", "mistral", "nebius",
	"openai", "openrouter", "xai"}

// secretValue reads the value from --password-stdin (all of stdin, trailing
// newline dropped) or answers the prompt from stdin's first line; with
// --no-input a prompt is an error. The value is only ever fingerprinted.
func (a *app) secretValue(fromStdin bool, token, what string) (string, error) {
	if token != "" {
		return token, nil
	}
	if fromStdin {
		b, err := io.ReadAll(a.Stdin)
		if err != nil {
			return "", err
		}
		if v := strings.TrimRight(string(b), "\r\n"); v != "" {
			return v, nil
		}
		return "", errf("no secret value on stdin")
	}
	if a.noInput {
		return "", errf("a value for %s is required; pipe it with --password-stdin", what) // UNCONFIRMED
	}
	fmt.Fprintf(a.Stdout, "Enter the value for %s: ", what)
	line, _ := bufio.NewReader(a.Stdin).ReadString('\n')
	fmt.Fprintln(a.Stdout)
	if v := strings.TrimRight(line, "\r\n"); v != "" {
		return v, nil
	}
	return "", errf("cancelled")
}

// putSecret stores (or, with force or a confirmed prompt, replaces) s.
func (a *app) putSecret(st *fakestate.State, s fakestate.Secret, force bool, instead string) error {
	if s.Scope != "" && s.Scope != "*" {
		if _, err := a.lookup(st, s.Scope); err != nil {
			return err
		}
	}
	i := slices.IndexFunc(st.Secrets, func(x fakestate.Secret) bool {
		return x.Scope == s.Scope && x.Type == s.Type && x.Name == s.Name
	})
	if i < 0 {
		st.Secrets = append(st.Secrets, s)
		return nil
	}
	ok, err := a.confirm(force, fmt.Sprintf("Secret %s already exists. Overwrite?", s.Name), instead)
	if err != nil {
		return err
	}
	if !ok {
		return errf("cancelled")
	}
	st.Secrets[i] = s
	return nil
}

// secretSet is `sbx secret set [SERVICE] [flags]` (docker-sandboxes-cli.md
// §1.3 secret, 0.38.0+ syntax: global unless --sandbox).
func (a *app) secretSet(args []string) error {
	fs := fakecli.Flags("secret set")
	sandbox := fs.String("sandbox", "", "Scope the secret to one sandbox instead of its default scope")
	fromStdin := fs.Bool("password-stdin", false, "Read the secret from stdin")
	token := fs.StringP("token", "t", "", "Secret value")
	force := fs.BoolP("force", "f", false, "Overwrite without asking")
	registry := fs.String("registry", "", "Registry host")
	username := fs.String("username", "", "Registry user name")
	allSandboxes := fs.Bool("all-sandboxes", false, "Registry credentials for all sandboxes")
	command := fs.String("command", "", "Command printing the secret (dynamic secret)")
	ref := fs.String("ref", "", "Secret reference (op://, AWS Secrets Manager ARN)")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	s := fakestate.Secret{Scope: *sandbox, Type: "service"}
	if *registry != "" {
		if err := argsCheck(args, 0, 0); err != nil {
			return err
		}
		s.Type, s.Name, s.Host = "registry", *registry, *username
		if *allSandboxes {
			s.Scope = "*"
		}
	} else {
		if err := argsCheck(args, 1, 1); err != nil {
			return err
		}
		if !slices.Contains(services, args[0]) {
			return errf("unknown service %q; supported services: %s", args[0], strings.Join(services, ", "))
		}
		s.Name = args[0]
	}
	var value string
	switch {
	case *command != "":
		value = "command:" + *command
	case *ref != "":
		value = "ref:" + *ref
	default:
		if value, err = a.secretValue(*fromStdin, *token, s.Name); err != nil {
			return err
		}
	}
	s.SHA256 = fakestate.Fingerprint(value)
	return a.Store.Update(func(st *fakestate.State) error {
		return a.putSecret(st, s, *force, "sbx secret set --force ...")
	})
}

// secretSetCustom is `sbx secret set-custom [--sandbox S] --host H --env VAR
// (--value V | --password-stdin)` (experimental, evidence §3.8).
func (a *app) secretSetCustom(args []string) error {
	fs := fakecli.Flags("secret set-custom")
	host := fs.String("host", "", "Host the secret is injected for")
	env := fs.String("env", "", "Environment variable the sandbox sees")
	value := fs.String("value", "", "Secret value")
	sandbox := fs.String("sandbox", "", "Scope the secret to one sandbox")
	fromStdin := fs.Bool("password-stdin", false, "Read the secret from stdin")
	force := fs.BoolP("force", "f", false, "Overwrite without asking")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	if *host == "" || *env == "" {
		return errf("--host and --env are required")
	}
	v, err := a.secretValue(*fromStdin, *value, *env)
	if err != nil {
		return err
	}
	s := fakestate.Secret{Scope: *sandbox, Type: "custom", Name: *env, Host: *host, SHA256: fakestate.Fingerprint(v)}
	return a.Store.Update(func(st *fakestate.State) error {
		return a.putSecret(st, s, *force, "sbx secret set-custom --force ...")
	})
}

// secretJSON and customJSON are `sbx secret ls --json` (evidence §1.4,
// sbx-go-sdk secret.go and a [3P] parser at v0.42.1): both keys are printed
// even when empty; scope is "global", "host-only" (registry) or the
// sandbox; the value is masked. The fake keeps no value, so the mask is
// fixed.
type secretJSON struct {
	Scope    string `json:"scope"`
	Type     string `json:"type"`
	Name     string `json:"name"`
	Secret   string `json:"secret"`
	Username string `json:"username,omitempty"`
}

type customJSON struct {
	Scope       string   `json:"scope"`
	Targets     []string `json:"targets"`
	Env         string   `json:"env"`
	Placeholder string   `json:"placeholder"`
	Secret      string   `json:"secret"`
}

const masked = "****...****"

func scopeText(scope, typ string) string {
	switch {
	case scope == "" && typ == "registry":
		return "host-only"
	case scope == "" || scope == "*":
		return "global"
	}
	return scope
}

func (a *app) secretLs(args []string) error {
	fs := fakecli.Flags("secret ls")
	jsonFlag := new(bool)
	if a.Version.AtLeast(vJSON) {
		fs.BoolVar(jsonFlag, "json", false, "Output in JSON format")
	}
	quiet := fs.BoolP("quiet", "q", false, "Only display secret names")
	sandbox := fs.String("sandbox", "", "Only secrets scoped to this sandbox")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	var secrets []fakestate.Secret
	if err := a.Store.View(func(st *fakestate.State) error {
		if *sandbox != "" {
			if _, err := a.lookup(st, *sandbox); err != nil {
				return err
			}
		}
		for _, s := range st.Secrets {
			if *sandbox == "" || s.Scope == *sandbox {
				secrets = append(secrets, s)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	switch {
	case *quiet:
		for _, s := range secrets {
			fmt.Fprintln(a.Stdout, s.Name)
		}
		return nil
	case *jsonFlag:
		doc := struct {
			Secrets []secretJSON `json:"secrets"`
			Custom  []customJSON `json:"custom_secrets"`
		}{[]secretJSON{}, []customJSON{}}
		for _, s := range secrets {
			if s.Type == "custom" {
				doc.Custom = append(doc.Custom, customJSON{Scope: scopeText(s.Scope, s.Type), Targets: []string{s.Host},
					Env: s.Name, Placeholder: "sbx-cs-" + s.SHA256[:20], Secret: masked})
				continue
			}
			doc.Secrets = append(doc.Secrets, secretJSON{Scope: scopeText(s.Scope, s.Type), Type: s.Type, Name: s.Name,
				Secret: masked, Username: map[bool]string{true: s.Host}[s.Type == "registry"]})
		}
		return a.JSON(doc)
	}
	// Format: docker-sandboxes-cli.md §2.10 (scope "(global)" in the table).
	rows := [][]string{{"SCOPE", "TYPE", "NAME", "SECRET"}}
	for _, s := range secrets {
		scope := scopeText(s.Scope, s.Type)
		if scope == "global" {
			scope = "(global)"
		}
		rows = append(rows, []string{scope, s.Type, s.Name, masked})
	}
	return fakecli.Table(a.Stdout, rows)
}

func (a *app) secretRm(args []string) error {
	fs := fakecli.Flags("secret rm")
	sandbox := fs.String("sandbox", "", "Sandbox the secret is scoped to")
	registry := fs.String("registry", "", "Registry host")
	fs.BoolP("force", "f", false, "Skip confirmation")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	name := *registry
	if name == "" {
		if err := argsCheck(args, 1, 1); err != nil {
			return err
		}
		name = args[0]
	}
	return a.Store.Update(func(st *fakestate.State) error {
		if *sandbox != "" {
			if _, err := a.lookup(st, *sandbox); err != nil {
				return err
			}
		}
		n := len(st.Secrets)
		st.Secrets = slices.DeleteFunc(st.Secrets, func(s fakestate.Secret) bool { return s.Scope == *sandbox && s.Name == name })
		if len(st.Secrets) == n {
			// 0.45.0: "secret rm" errors on a missing secret; wording
			// UNCONFIRMED.
			return errf("secret '%s' not found", name)
		}
		return nil
	})
}
