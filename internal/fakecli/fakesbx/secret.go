package fakesbx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// services are the secret services of docker-sandboxes-cli.md §1.3 secret
// (newest list; evidence §3.8).
var services = []string{"anthropic", "cursor", "droid", "github", "google", "groq", "mistral", "nebius",
	"openai", "openrouter", "xai"}

// secretValue reads a value: -t, else stdin. The fake's stdin is never a
// terminal, so there is no prompt: a piped value is read whole, its
// trailing newline dropped, with or without --password-stdin (`echo
// "$ANTHROPIC_API_KEY" | sbx secret set -g anthropic`, Docker's
// credentials docs) and with or without --no-input (a piped value is not
// an answer to a prompt). The value is only ever fingerprinted, never
// printed.
func (a *app) secretValue(token, what string) (string, error) {
	if token != "" {
		return token, nil
	}
	b, err := io.ReadAll(a.Stdin)
	if err != nil {
		return "", err
	}
	if v := strings.TrimRight(string(b), "\r\n"); v != "" {
		return v, nil
	}
	return "", errf("no value for %s on stdin", what) // UNCONFIRMED wording
}

// cancelled is the overwrite prompt answered by a closed stdin: "cancels,
// exiting 0 — a silent no-op" (evidence §3.8, sbx-go-sdk secret.go; 0.45's
// "declining returns non-zero" may have changed this, UNCONFIRMED). The
// state is left as it was.
var cancelled = &fakecli.Exit{Code: 0}

// putSecret stores s, or replaces the secret of the same scope, type and
// name: with force; with --no-input a prompt is an error; otherwise the
// overwrite prompt is asked on a stdin that is not a terminal and cancels
// silently.
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
	if !force {
		if a.noInput {
			return errf("secret %s already exists; confirmation required; run: %s", s.Name, instead) // UNCONFIRMED wording
		}
		fmt.Fprintf(a.Stdout, "Secret %s already exists. Overwrite? (y/N): ", s.Name) // UNCONFIRMED wording
		return cancelled
	}
	st.Secrets[i] = s
	return nil
}

// secretSet is `sbx secret set [SERVICE] [flags]` (evidence §3.8,
// docker-sandboxes-cli.md §1.3 secret; 0.38.0+ syntax: global unless
// --sandbox): the value from -t or stdin; -f overwrites without the
// prompt.
func (a *app) secretSet(args []string) error {
	fs := fakecli.Flags("secret set")
	sandbox := fs.String("sandbox", "", "Scope the secret to one sandbox instead of its default scope")
	fs.Bool("password-stdin", false, "Read the secret from stdin")
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
		if value, err = a.secretValue(*token, s.Name); err != nil {
			return err
		}
	}
	s.SHA256 = fakestate.Fingerprint(value)
	return a.Store.Update(func(st *fakestate.State) error {
		return a.putSecret(st, s, *force, "sbx secret set --force ...")
	})
}

// secretSetCustom is `sbx secret set-custom [--sandbox S] --host H…
// --env VAR (--value V | --ref R | --command CMD) [--placeholder P]`
// (experimental; evidence §3.8; Docker's credentials docs, "Custom
// secrets"). It prints `Saved custom secret placeholder "P"`. P defaults to
// sbx-cs-{rand}; "{rand}" in a given one is replaced, anything else is
// kept as given (UNCONFIRMED). A --command is run once through the host
// shell to verify it ("sbx verifies the source when you register it",
// --no-verify skips it), its output fingerprinted and its stderr never
// shown. The evidence gives set-custom no -f: a secret of the same scope
// and variable is an overwrite whose prompt cancels (UNCONFIRMED).
func (a *app) secretSetCustom(args []string) error {
	fs := fakecli.Flags("secret set-custom")
	hosts := fs.StringArray("host", nil, "Host the secret is injected for (repeatable)")
	env := fs.String("env", "", "Environment variable the sandbox sees")
	value := fs.String("value", "", "Secret value")
	ref := fs.String("ref", "", "Secret reference (op://, AWS Secrets Manager ARN)")
	command := fs.String("command", "", "Host command printing the secret (dynamic secret)")
	fs.String("refresh", "", "Cache the resolved value this long")
	noVerify := fs.Bool("no-verify", false, "Store a source without resolving it")
	placeholder := fs.String("placeholder", "sbx-cs-{rand}", "Placeholder the sandbox sees")
	sandbox := fs.String("sandbox", "", "Scope the secret to one sandbox")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	if len(*hosts) == 0 || *env == "" {
		return errf("--host and --env are required")
	}
	sources := 0
	for _, f := range []string{"value", "ref", "command"} {
		if fs.Changed(f) {
			sources++
		}
	}
	if sources != 1 {
		return errf("exactly one of --value, --ref and --command is required") // UNCONFIRMED wording
	}
	var v string
	switch {
	case *value != "":
		v = *value
	case *ref != "":
		v = "ref:" + *ref
	case *noVerify:
		v = "command:" + *command
	default:
		if v, err = a.resolve(*command); err != nil {
			return err
		}
	}
	s := fakestate.Secret{Scope: *sandbox, Type: "custom", Name: *env, Hosts: *hosts, SHA256: fakestate.Fingerprint(v)}
	err = a.Store.Update(func(st *fakestate.State) error {
		st.Seq++
		h := sha256.Sum256([]byte(fmt.Sprintf("custom %d %s", st.Seq, *env)))
		s.Placeholder = strings.ReplaceAll(*placeholder, "{rand}", hex.EncodeToString(h[:])[:20])
		return a.putSecret(st, s, false, "sbx secret rm --placeholder ... -f, then sbx secret set-custom ...")
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.Stdout, "Saved custom secret placeholder %q\n", s.Placeholder)
	return nil
}

// resolve runs a dynamic secret's command through the host shell and
// returns what it printed, trimmed ("sbx runs the command through the
// host shell and trims its output", Docker's credentials docs). A failure
// says only that it failed: the resolver's stderr may hold the secret.
func (a *app) resolve(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", command).Output()
	v := strings.TrimSpace(string(out))
	if err != nil || v == "" {
		return "", errf("the secret source could not be verified; use --show-error to see why, or --no-verify to store it anyway") // UNCONFIRMED wording
	}
	return v, nil
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
				doc.Custom = append(doc.Custom, customJSON{Scope: scopeText(s.Scope, s.Type), Targets: s.Hosts,
					Env: s.Name, Placeholder: s.Placeholder, Secret: masked})
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

// secretRm is `sbx secret rm [--sandbox S] SERVICE -f`, `sbx secret rm
// [--sandbox S] --placeholder P -f` (a custom secret) and `sbx secret rm
// [--sandbox S | --all-sandboxes] --registry HOST -f` (evidence §3.8;
// Docker's credentials docs). Since 0.45.0 it asks for confirmation
// without -f ("confirmations everywhere", declining exits non-zero) and a
// missing secret is an error (docker-sandboxes-cli.md §1.3 secret).
func (a *app) secretRm(args []string) error {
	fs := fakecli.Flags("secret rm")
	sandbox := fs.String("sandbox", "", "Sandbox the secret is scoped to")
	registry := fs.String("registry", "", "Registry host")
	allSandboxes := fs.Bool("all-sandboxes", false, "Only the all-sandboxes registry entry")
	placeholder := fs.String("placeholder", "", "Placeholder of the custom secret to remove")
	force := fs.BoolP("force", "f", false, "Skip confirmation")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	var what string
	var match func(s fakestate.Secret) bool
	switch {
	case *registry != "":
		if err := argsCheck(args, 0, 0); err != nil {
			return err
		}
		what = *registry
		match = func(s fakestate.Secret) bool {
			if s.Type != "registry" || s.Name != *registry {
				return false
			}
			switch {
			case *sandbox != "":
				return s.Scope == *sandbox
			case *allSandboxes:
				return s.Scope == "*"
			}
			return s.Scope == "" || s.Scope == "*"
		}
	case *placeholder != "":
		if err := argsCheck(args, 0, 0); err != nil {
			return err
		}
		what = *placeholder
		match = func(s fakestate.Secret) bool {
			return s.Type == "custom" && s.Scope == *sandbox && s.Placeholder == *placeholder
		}
	default:
		if err := argsCheck(args, 1, 1); err != nil {
			return err
		}
		what = args[0]
		match = func(s fakestate.Secret) bool { return s.Type == "service" && s.Scope == *sandbox && s.Name == args[0] }
	}
	return a.Store.Update(func(st *fakestate.State) error {
		if *sandbox != "" {
			if _, err := a.lookup(st, *sandbox); err != nil {
				return err
			}
		}
		n := len(st.Secrets)
		kept := slices.DeleteFunc(slices.Clone(st.Secrets), match)
		if len(kept) == n {
			if a.Version.AtLeast(vConfirm) {
				return errf("secret '%s' not found", what) // wording UNCONFIRMED
			}
			return nil
		}
		if a.Version.AtLeast(vConfirm) {
			ok, err := a.confirm(*force, fmt.Sprintf("Remove secret %s?", what), "sbx secret rm --force ...")
			if err != nil {
				return err
			}
			if !ok {
				return errf("cancelled")
			}
		}
		st.Secrets = kept
		return nil
	})
}
