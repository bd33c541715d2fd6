package main

import (
	"os"
	"regexp"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPreCommitHooks parses .pre-commit-hooks.yaml as pre-commit would and
// checks the hook runs sbx validate on exactly the sandbox files.
func TestPreCommitHooks(t *testing.T) {
	data, err := os.ReadFile("../../.pre-commit-hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var hooks []map[string]any
	if err := yaml.Unmarshal(data, &hooks); err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 1 {
		t.Fatalf("got %d hooks, want 1", len(hooks))
	}
	h := hooks[0]
	for _, k := range []string{"id", "name", "entry", "language", "files"} {
		if _, ok := h[k].(string); !ok {
			t.Errorf("hook lacks string field %q (pre-commit requires it)", k)
		}
	}
	if h["id"] != "sbx-validate" || h["language"] != "golang" {
		t.Errorf("id=%v language=%v, want sbx-validate golang", h["id"], h["language"])
	}
	if entry, _ := h["entry"].(string); !regexp.MustCompile(`^sbx validate\b`).MatchString(entry) {
		t.Errorf("entry = %q, want sbx validate", entry)
	}
	files := regexp.MustCompile(h["files"].(string))
	for name, want := range map[string]bool{
		"sandbox.yaml":            true,
		"sandbox.local.yaml":      true,
		"api/sandbox.yml":         true,
		"api.sandbox.yaml":        true,
		"svc/web.sandbox.yaml":    true,
		"mysandbox.yaml":          false,
		"sandbox.yaml.example":    false,
		"docs/sandbox.yaml.md":    false,
		"sandbox.local.yaml.orig": false,
	} {
		if got := files.MatchString(name); got != want {
			t.Errorf("files pattern matches %q = %v, want %v", name, got, want)
		}
	}
}
