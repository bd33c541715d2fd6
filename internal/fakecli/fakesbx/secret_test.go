package fakesbx

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// TestSecretOverwrite: a service secret's value comes from stdin; setting
// it again without -f asks to overwrite on a stdin that is no terminal,
// which cancels silently with exit 0 (evidence §3.8), and with --no-input
// is an error; -f overwrites.
func TestSecretOverwrite(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create -q --name api shell $WS"},
		{Args: "secret set --sandbox api anthropic", Stdin: "sk-ant-one\n"},
		{Args: "secret set --sandbox api anthropic", Stdin: "sk-ant-two\n", Stdout: "Secret anthropic already exists. Overwrite? (y/N): "},
		{Args: "--no-input secret set --sandbox api anthropic", Stdin: "sk-ant-two\n", Code: 1,
			Stderr: "error: secret anthropic already exists; confirmation required; run: sbx secret set --force ...\n"},
	})
	if got := w.Load(t).Secrets[0].SHA256; got != fakestate.Fingerprint("sk-ant-one") {
		t.Errorf("after a cancelled overwrite the secret is %s, want the first value's fingerprint", got)
	}
	w.Steps(t, []step{{Args: "--no-input secret set --sandbox api anthropic -f", Stdin: "sk-ant-two\n"}})
	if got := w.Load(t).Secrets[0].SHA256; got != fakestate.Fingerprint("sk-ant-two") {
		t.Errorf("after -f the secret is %s, want the second value's fingerprint", got)
	}
}

// TestSecretCustom: set-custom with repeated --host, a placeholder kept as
// given and a --command run through the shell to verify it; the line it
// prints; no -f; listing, removal by placeholder (with -f, confirmed,
// missing), and `sbx rm` taking the sandbox's secrets with it.
func TestSecretCustom(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create -q --name api shell $WS"},
		{Args: "secret set-custom --sandbox api --host a.example.com --host b.example.com --env TOKEN --placeholder sbx-0123 --command printf\\ %s\\ 'x\\ y'",
			Stdout: "Saved custom secret placeholder \"sbx-0123\"\n"},
		{Args: "secret set-custom --sandbox api --host a.example.com --env TOKEN --placeholder sbx-0123 --value v",
			Stdout: "Secret TOKEN already exists. Overwrite? (y/N): "},
		{Args: "secret set-custom -f --sandbox api --host a.example.com --env TOKEN --value v", Code: 1,
			Stderr: "error: unknown shorthand flag: 'f' in -f\n"},
		{Args: "secret set-custom --sandbox api --host c.example.com --env OTHER --command false", Code: 1,
			Stderr: "error: the secret source could not be verified; use --show-error to see why, or --no-verify to store it anyway\n"},
		{Args: "secret set-custom --sandbox api --host c.example.com --env OTHER --value v --command true", Code: 1,
			Stderr: "error: exactly one of --value, --ref and --command is required\n"},
		{Args: "secret set --sandbox api github", Stdin: "ghp_x"},
		{Args: "secret ls --json", Stdout: `{
  "secrets": [
    {
      "scope": "api",
      "type": "service",
      "name": "github",
      "secret": "****...****"
    }
  ],
  "custom_secrets": [
    {
      "scope": "api",
      "targets": [
        "a.example.com",
        "b.example.com"
      ],
      "env": "TOKEN",
      "placeholder": "sbx-0123",
      "secret": "****...****"
    }
  ]
}
`},
		{Args: "secret rm --sandbox api --placeholder sbx-0123", Code: 1, Stdout: "Remove secret sbx-0123? (y/N): ", Stderr: "error: cancelled\n"},
		{Args: "secret rm --sandbox api --placeholder sbx-0123 -f"},
		{Args: "secret rm --sandbox api --placeholder sbx-0123 -f", Code: 1, Stderr: "error: secret 'sbx-0123' not found\n"},
		{Args: "secret rm --sandbox api TOKEN -f", Code: 1, Stderr: "error: secret 'TOKEN' not found\n"},
		{Args: "secret set-custom --sandbox api --host a.example.com --env TOKEN --command echo\\ hi",
			Stdout: "Saved custom secret placeholder \"sbx-cs-a079d511ce508cf23d06\"\n"},
		{Args: "rm --force api", Stdout: "Sandbox 'api' removed\n"},
		{Args: "secret ls --json", Stdout: "{\n  \"secrets\": [],\n  \"custom_secrets\": []\n}\n"},
	})
}

// TestSecretCustomValue: what a verified command printed is what the
// fake keeps (fingerprinted), so a test can check that a quoted command
// reached the shell whole.
func TestSecretCustomValue(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create -q --name api shell $WS"},
		{Args: "secret set-custom --sandbox api --host a.example.com --env TOKEN --placeholder p --command printf\\ %s\\ 'x\\ y'",
			Stdout: "Saved custom secret placeholder \"p\"\n"},
	})
	want := []fakestate.Secret{{Scope: "api", Type: "custom", Name: "TOKEN", Hosts: []string{"a.example.com"}, Placeholder: "p", SHA256: fakestate.Fingerprint("x y")}}
	if diff := cmp.Diff(want, w.Load(t).Secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
}

// TestSecretRmBefore045: before 0.45.0, rm asks nothing and a missing
// secret is no error (docker-sandboxes-cli.md §1.3 secret).
func TestSecretRmBefore045(t *testing.T) {
	w := newWorld(t)
	w.Env["FAKE_SBX_VERSION"] = "0.42.0"
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create --name api shell $WS", Stdout: "✓ Created sandbox api\n"},
		{Args: "secret set --sandbox api openai", Stdin: "sk-proj-x"},
		{Args: "secret rm --sandbox api openai"},
		{Args: "secret rm --sandbox api openai"},
		{Args: "secret ls --json", Stdout: "{\n  \"secrets\": [],\n  \"custom_secrets\": []\n}\n"},
	})
}
