package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeWorld is the environment in which a test runs this sbx as a process
// against the fake of Docker's sbx (which TestMain puts on PATH): HOME,
// the state directory and the fake's state in dir, this sbx's directory
// first on PATH, and the fake's policy initialised deny-all as a real
// Docker sbx's first run asks. It returns the environment and the paths
// of this sbx and of the fake.
func fakeWorld(t *testing.T, dir string) (env []string, sbxBin, fake string) {
	t.Helper()
	sbxBin, err := exec.LookPath("sbx")
	if err != nil {
		t.Fatal(err)
	}
	fake, err = exec.LookPath("docker-sbx")
	if err != nil {
		t.Fatal(err)
	}
	env = append(os.Environ(), "PATH="+filepath.Dir(sbxBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir, "SBX_STATE_DIR="+filepath.Join(dir, "state"), "SBX_DOCKER_SBX="+fake,
		"FAKE_SBX_STATE="+filepath.Join(dir, "fake.json"))
	init := exec.Command(fake, "policy", "init", "deny-all")
	init.Env = env
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("policy init: %v: %s", err, out)
	}
	return env, sbxBin, fake
}
