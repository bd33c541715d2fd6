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
// newline dropped) or, failing that, answers the prompt from stdin's first
// line; with --no-input a prompt is an error. The value is only ever
// fingerprinted.
func (a *app) secretValue(fromStdin bool, token, what string) (string, error) {
	if token != "" {
		return token, nil
	}
	if fromStdin {
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return "", err
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", &cliError{msg: "no secret value on stdin", code: 1}
		}
		return v, nil
	}
	if a.noInput {
		// UNCONFIRMED wording (§1.3 --no-input).
		return "", &cliError{msg: fmt.Sprintf("a value for %s is required; pipe it with --password-stdin", what), code: 1}
	}
	fmt.Fprintf(a.stdout, "Enter the value for %s: ", what)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	fmt.Fprintln(a.stdout)
	v := strings.TrimRight(line, "\r\n")
	if v == "" {
		return "", &cliError{msg: "cancelled", code: 1}
	}
	return v, nil
}

// putSecret stores (or, with force or a confirmed prompt, replaces) s.
func (a *app) putSecret(st *fakestate.State, s fakestate.Secret, force bool, instead string) error {
	if s.Scope != "" {
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
	// -f/--force is documented without a description; the fake reads it
	// as "overwrite without asking" (UNCONFIRMED).
	if err := a.confirm(force, fmt.Sprintf("Secret %s already exists. Overwrite?", s.Name), instead); err != nil {
		return err
	}
	st.Secrets[i] = s
	return nil
}

// secretSet is `sbx secret set [SERVICE] [flags]` (docker-sandboxes-cli.md
// §1.3 secret, 0.38.0+ syntax: global unless --sandbox). Output UNCONFIRMED
// (none).
func (a *app) secretSet(args []string) error {
	fs := newFlags("secret set")
	sandbox := fs.String("sandbox", "", "Scope the secret to one sandbox instead of its default scope")
	fromStdin := fs.Bool("password-stdin", false, "Read the secret from stdin")
	token := fs.StringP("token", "t", "", "Secret value")
	force := fs.BoolP("force", "f", false, "Overwrite without asking")
	registry := fs.String("registry", "", "Registry host")
	username := fs.String("username", "", "Registry user name")
	allSandboxes := fs.Bool("all-sandboxes", false, "Registry credentials for all sandboxes")
	command := fs.String("command", "", "Command printing the secret (dynamic secret)")
	ref := fs.String("ref", "", "Secret reference (op://, AWS Secrets Manager ARN)")
	fs.Bool("refresh", false, "Refresh a dynamic secret")
	fs.Bool("oauth", false, "OAuth sign-in (openai/global only)")
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
			return &cliError{msg: fmt.Sprintf("unknown service %q; supported services: %s", args[0], strings.Join(services, ", ")), code: 1}
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
	return a.store.Update(func(st *fakestate.State) error {
		return a.putSecret(st, s, *force, "sbx secret set --force ...")
	})
}

// secretSetCustom is `sbx secret set-custom` (experimental; --host, --env,
// --value documented in docker-sandboxes-cli.md §1.3; --sandbox and
// --password-stdin are the fake's reading of the elided "...",
// UNCONFIRMED).
func (a *app) secretSetCustom(args []string) error {
	fs := newFlags("secret set-custom")
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
		return &cliError{msg: "--host and --env are required", code: 1}
	}
	v, err := a.secretValue(*fromStdin, *value, *env)
	if err != nil {
		return err
	}
	s := fakestate.Secret{Scope: *sandbox, Type: "custom", Name: *env, Host: *host, SHA256: fakestate.Fingerprint(v)}
	return a.store.Update(func(st *fakestate.State) error {
		return a.putSecret(st, s, *force, "sbx secret set-custom --force ...")
	})
}

func scopeText(scope string) string {
	switch scope {
	case "":
		return "(global)"
	case "*":
		return "(all sandboxes)"
	}
	return scope
}

func (a *app) secretLs(args []string) error {
	fs := newFlags("secret ls")
	jsonFlag := new(bool)
	if a.version.AtLeast("0.42.0") {
		fs.BoolVar(jsonFlag, "json", false, "Output in JSON format")
	}
	quiet := new(bool)
	if a.version.AtLeast("0.45.0") {
		fs.BoolVarP(quiet, "quiet", "q", false, "Only display secret names")
	}
	sandbox := fs.String("sandbox", "", "Only secrets scoped to this sandbox")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	var secrets []fakestate.Secret
	if err := a.store.View(func(st *fakestate.State) error {
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
			fmt.Fprintln(a.stdout, s.Name)
		}
		return nil
	case *jsonFlag:
		// Schema UNCONFIRMED (docker-sandboxes-cli.md §9); no value or
		// fingerprint is printed.
		out := []map[string]string{}
		for _, s := range secrets {
			out = append(out, map[string]string{"scope": scopeText(s.Scope), "type": s.Type, "name": s.Name})
		}
		return a.json(map[string]any{"secrets": out})
	}
	// Format: docker-sandboxes-cli.md §2.10. The real SECRET column shows the
	// value's first and last characters; the fake keeps no value, so it
	// prints only the mask.
	rows := [][]string{{"SCOPE", "TYPE", "NAME", "SECRET"}}
	for _, s := range secrets {
		rows = append(rows, []string{scopeText(s.Scope), s.Type, s.Name, "****...****"})
	}
	return fakecli.Table(a.stdout, rows)
}

func (a *app) secretRm(args []string) error {
	fs := newFlags("secret rm")
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
	return a.store.Update(func(st *fakestate.State) error {
		if *sandbox != "" {
			if _, err := a.lookup(st, *sandbox); err != nil {
				return err
			}
		}
		n := len(st.Secrets)
		st.Secrets = slices.DeleteFunc(st.Secrets, func(s fakestate.Secret) bool { return s.Scope == *sandbox && s.Name == name })
		if len(st.Secrets) == n {
			// 0.45.0: "secret rm" errors on a missing secret; wording
			// UNCONFIRMED, in the 0.42.0 not-found pattern.
			return &cliError{msg: fmt.Sprintf("secret '%s' not found", name), code: 1}
		}
		return nil
	})
}
