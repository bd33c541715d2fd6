package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sbxdriver "github.com/sbxhq/sbx/driver/sbx"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
)

// TestInitSecretsUncomment: the secrets init writes commented out are
// valid once uncommented, for every agent that has them, and declare the
// variable the agent reads its key from, read from the one users export.
func TestInitSecretsUncomment(t *testing.T) {
	sch, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, agent := range spec.Agents {
		ag := spec.AgentOf(agent)
		if ag.Key == "" {
			continue
		}
		t.Run(agent, func(t *testing.T) {
			text := initFile(agent)
			if strings.Contains(text, "\nsecrets:") {
				t.Fatal("init declares secrets uncommented: plan, apply and shell would need them exported")
			}
			text = strings.Replace(text, "\n# secrets:\n", "\nsecrets:\n", 1)
			text = strings.Replace(text, "\n#   "+ag.Key+": ", "\n  "+ag.Key+": ", 1)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "PROMPT.md"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := spec.Parse("sandbox.yaml", dir, []byte(text), spec.Options{Schema: sch, Offline: true})
			if err != nil {
				t.Fatalf("uncommented: %v\n%s", err, text)
			}
			if got := res.Specs[0].Secrets[ag.Key]; got.Env != ag.HostKey {
				t.Errorf("uncommented file declares %s as %+v, want it read from %s", ag.Key, got, ag.HostKey)
			}
		})
	}
}

// TestVersionIsOwn: what `sbx version` prints is what the sbx driver
// recognises as a copy of this sbx found where Docker's sbx should be.
func TestVersionIsOwn(t *testing.T) {
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, strings.NewReader(""), &out, io.Discard, os.Environ()); code != 0 {
		t.Fatalf("sbx version: exit %d", code)
	}
	if !sbxdriver.OwnVersion.Match(out.Bytes()) {
		t.Errorf("sbx version printed %q, which the sbx driver does not take for this sbx", out.String())
	}
}
