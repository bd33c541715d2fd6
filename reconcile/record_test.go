package reconcile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestStorePermissionsAndRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st, err := OpenStore(state.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Key(); err != nil {
		t.Fatal(err)
	}
	rec := recordOf(t, sbxCaps(), baseSpec())
	if err := st.Put(rec); err != nil {
		t.Fatal(err)
	}
	checks := map[string]os.FileMode{
		dir:                                  0o700,
		filepath.Join(dir, "key"):            0o600,
		filepath.Join(dir, "records", "sbx"): 0o700,
		filepath.Join(dir, "records", "sbx", "api.json"): 0o600,
	}
	for path, want := range checks {
		if got := mode(t, path); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
	if err := st.Dir.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	got, err := st.Get("sbx", "api")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("record round trip (-want +got):\n%s", diff)
	}
	if r, err := st.Get("docker-sandbox", "api"); r != nil || err != nil {
		t.Errorf("record of another driver: %v, %v", r, err)
	}

	if err := os.Chmod(filepath.Join(dir, "records", "sbx", "api.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Dir.Check(); err == nil || !strings.Contains(err.Error(), "api.json has mode 0644, want 0600") {
		t.Errorf("Check after chmod: %v", err)
	}
}

func TestStorePutIsAtomic(t *testing.T) {
	st, _ := OpenStore(state.Dir(t.TempDir()))
	old := recordOf(t, sbxCaps(), baseSpec())
	if err := st.Put(old); err != nil {
		t.Fatal(err)
	}
	// A write interrupted before its rename leaves only a temporary file,
	// which readers never see.
	recDir := st.Dir.Records("sbx")
	if err := os.WriteFile(filepath.Join(recDir, ".api.tmp-123"), []byte(`{"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get("sbx", "api")
	if err != nil || got == nil {
		t.Fatalf("Get after interrupted write: %v, %v", got, err)
	}
	next := baseSpec()
	next.Env["NODE_ENV"] = "production"
	if err := st.Put(recordOf(t, sbxCaps(), next)); err != nil {
		t.Fatal(err)
	}
	got, _ = st.Get("sbx", "api")
	if got.Config.Env["NODE_ENV"] != "production" {
		t.Errorf("record not replaced: %v", got.Config.Env)
	}
	entries, _ := os.ReadDir(recDir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// Put leaves no temporary file of its own behind.
	if diff := cmp.Diff([]string{".api.tmp-123", "api.json"}, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestStoreKeyIsCreatedOnceAndReused(t *testing.T) {
	dir := state.Dir(t.TempDir())
	st1, _ := OpenStore(dir)
	k1, err := st1.Key()
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != KeySize {
		t.Fatalf("key has %d bytes", len(k1))
	}
	st2, _ := OpenStore(dir)
	k2, err := st2.Key()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1, k2) {
		t.Error("second Key() made a new key")
	}
	other, _ := OpenStore(state.Dir(t.TempDir()))
	k3, _ := other.Key()
	if bytes.Equal(k1, k3) {
		t.Error("two machines share a key")
	}
}

func TestFingerprintIsKeyed(t *testing.T) {
	value := "hunter2"
	plain := sha256.Sum256([]byte(value))
	fp := testKey.Fingerprint("env.PASSWORD", value)
	if strings.Contains(fp, hex.EncodeToString(plain[:])) {
		t.Error("fingerprint is a plain SHA-256 of the value")
	}
	if !strings.HasPrefix(fp, "hmac-sha256:") || len(fp) != len("hmac-sha256:")+64 {
		t.Errorf("fingerprint %q", fp)
	}
	if fp == Key(bytes.Repeat([]byte{8}, KeySize)).Fingerprint("env.PASSWORD", value) {
		t.Error("fingerprint does not depend on the key")
	}
	if fp != testKey.Fingerprint("env.PASSWORD", value) {
		t.Error("fingerprint is not deterministic")
	}
}

func TestRecordIsRedacted(t *testing.T) {
	sb := baseSpec()
	sb.Template.Image = "registry.internal/secret-team/agent:1"
	sb.Sensitive["template.image"] = true
	r := recordOf(t, sbxCaps(), sb)
	st, _ := OpenStore(state.Dir(t.TempDir()))
	if err := st.Put(r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(st.Dir.Record("sbx", "api"))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"postgresql://", "ghp_secret_value", "secret-team"} {
		if bytes.Contains(b, []byte(leak)) {
			t.Errorf("record contains %q:\n%s", leak, b)
		}
	}
	for _, want := range []string{`"managedBy": "github.com/sbxhq/sbx"`, `"env.DATABASE_URL": "hmac-sha256:`, `"NODE_ENV": "development"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("record lacks %s:\n%s", want, b)
		}
	}
	// What was applied is what the user approved, and destroying the
	// sandbox (which forgets the record) keeps that.
	if err := st.Delete("sbx", "api"); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get("sbx", "api"); err != nil || got != nil {
		t.Errorf("record after Delete = %v, %v; want none", got, err)
	}
	approved, err := st.Approved("api")
	if err != nil || approved == nil || approved.Config.Template.Image != r.Config.Template.Image {
		t.Errorf("approved after Delete = %+v, %v; want the record", approved, err)
	}
	// The redacted field still compares: planning the same spec is a no-op.
	live := liveOf(sb, sbxCaps())
	p := Plan([]Desired{desiredOf(t, sb)}, map[string]*Live{"api": live}, map[string]*Record{"api": r}, sbxCaps(), Options{})
	if !p.Empty() {
		var buf bytes.Buffer
		Render(&buf, p, false)
		t.Errorf("plan not empty:\n%s", buf.String())
	}
}

// TestRecordWithoutSensitive: a spec with no sensitive field is recorded
// from its own JSON, not through the generic tree redaction needs, and
// the record is the same either way.
func TestRecordWithoutSensitive(t *testing.T) {
	sb := baseSpec()
	sb.Sensitive = nil
	sb.Mounts = []spec.Mount{{Source: "/src/cache", Target: "/cache", ReadOnly: true}}
	sb.Ports = []spec.Port{{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}}
	sb.Resources = spec.Resources{CPUs: 1.5, Memory: 8 << 30, Pids: 512}
	sb.Kubernetes = &spec.Kubernetes{Namespace: "agents", WarmPool: 2}
	sb.Loop = &spec.Loop{Prompt: "/src/api/PROMPT.md", MaxIterations: 30, IterationTimeout: 15 * time.Minute, MaxDuration: 4 * time.Hour}
	d := desiredOf(t, sb)
	got, err := newRecord("docker", spec.Resources{}, d)
	if err != nil {
		t.Fatal(err)
	}
	// The tree's way, as a spec with sensitive fields is recorded.
	tree, err := toTree(sb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var want spec.Spec
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.Config, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("record config (-tree +own JSON):\n%s", diff)
	}
}

// TestPlaceholder: a placeholder is stable for one sandbox and secret on
// one machine, differs across sandboxes, secrets and machines, takes the
// key's shape, and holds nothing the proxy would mistake for another's.
func TestPlaceholder(t *testing.T) {
	k1 := Key(bytes.Repeat([]byte{1}, KeySize))
	k2 := Key(bytes.Repeat([]byte{2}, KeySize))
	p := k1.Placeholder("api", "ANTHROPIC_API_KEY", "sk-ant-api03-")
	if p != k1.Placeholder("api", "ANTHROPIC_API_KEY", "sk-ant-api03-") {
		t.Error("not stable")
	}
	if !strings.HasPrefix(p, "sk-ant-api03-sbx-") || len(p) != len("sk-ant-api03-sbx-")+32 {
		t.Errorf("shape %q", p)
	}
	others := []string{
		k1.Placeholder("web", "ANTHROPIC_API_KEY", "sk-ant-api03-"),
		k1.Placeholder("api", "GITHUB_TOKEN", "sk-ant-api03-"),
		k2.Placeholder("api", "ANTHROPIC_API_KEY", "sk-ant-api03-"),
	}
	for _, o := range others {
		if o == p || strings.Contains(o, p[len("sk-ant-api03-"):]) {
			t.Errorf("%q and %q share their random part", p, o)
		}
	}
}
