package k8stest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	run := filepath.Join(dir, "run")
	for _, d := range []string{bin, run} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "kubectl"), "#!/bin/sh\n", 0o755)
	write(filepath.Join(run, "bin-dir"), bin+"\n", 0o644)
	kubeconfig := func(server string) string {
		return "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: other\n  context: {cluster: remote}\n" +
			"- name: c\n  context: {cluster: local}\nclusters:\n- name: remote\n  cluster: {server: https://192.0.2.1:6443}\n" +
			"- name: local\n  cluster: {server: '" + server + "'}\n"
	}
	write(filepath.Join(run, "kubeconfig"), kubeconfig("https://127.0.0.1:16443"), 0o600)
	remote := filepath.Join(dir, "remote.kubeconfig")
	write(remote, kubeconfig("https://k8s.example.com:443"), 0o600)
	other := filepath.Join(dir, "other.kubeconfig")
	write(other, kubeconfig("https://[::1]:6443"), 0o600)

	type result struct {
		Kubeconfig, Bin, Run, Err string
	}
	tests := []struct {
		name string
		env  map[string]string
		want result
	}{
		{
			name: "exported by env",
			env:  map[string]string{"KUBECONFIG": other, "SBX_K8S_BIN": bin, "SBX_K8S_RUN": run},
			want: result{Kubeconfig: other, Bin: bin, Run: run},
		},
		{
			name: "run dir only",
			env:  map[string]string{"SBX_K8S_RUN": run},
			want: result{Kubeconfig: filepath.Join(run, "kubeconfig"), Bin: bin, Run: run},
		},
		{
			name: "a KUBECONFIG without SBX_K8S_BIN is not the test cluster's",
			env:  map[string]string{"KUBECONFIG": remote, "SBX_K8S_RUN": run},
			want: result{Kubeconfig: filepath.Join(run, "kubeconfig"), Bin: bin, Run: run},
		},
		{
			name: "remote cluster",
			env:  map[string]string{"KUBECONFIG": remote, "SBX_K8S_BIN": bin},
			want: result{Err: remote + " points at https://k8s.example.com:443, not at a cluster on this machine's loopback"},
		},
		{
			name: "kubeconfig list",
			env:  map[string]string{"KUBECONFIG": other + ":" + remote, "SBX_K8S_BIN": bin},
			want: result{Err: "KUBECONFIG lists several files (" + other + ":" + remote + "); the test cluster's is one"},
		},
		{
			name: "no kubectl",
			env:  map[string]string{"SBX_K8S_BIN": dir, "SBX_K8S_RUN": run},
			want: result{Err: "no kubectl in " + dir + ": exec: \"" + filepath.Join(dir, "kubectl") + "\": stat " + filepath.Join(dir, "kubectl") + ": no such file or directory"},
		},
		{
			name: "nothing running",
			env:  map[string]string{"SBX_K8S_RUN": filepath.Join(dir, "absent")},
			want: result{Err: "SBX_K8S_BIN is unset and open " + filepath.Join(dir, "absent", "bin-dir") + ": no such file or directory"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := find(func(k string) string { return tt.env[k] })
			var got result
			if err != nil {
				got.Err = err.Error()
			} else {
				got = result{Kubeconfig: e.Kubeconfig, Bin: e.Bin, Run: e.run}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("find (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamespaceName(t *testing.T) {
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	tests := []struct{ test, prefix string }{
		{"TestSandbox", "sbxtest-testsandbox-"},
		{"TestDriver/apply_then_plan#01", "sbxtest-testdriver-apply-then-plan-01-"},
		{"Test" + strings.Repeat("X", 100), "sbxtest-test" + strings.Repeat("x", 36) + "-"},
		{"Test/__/", "sbxtest-test-"},
		{"///", "sbxtest-test-"},
	}
	for _, tt := range tests {
		got := namespaceName(tt.test)
		if !strings.HasPrefix(got, tt.prefix) || len(got) != len(tt.prefix)+8 || len(got) > 63 || !label.MatchString(got) {
			t.Errorf("namespaceName(%q) = %q, want %q and 8 hex digits, a DNS-1123 label", tt.test, got, tt.prefix)
		}
	}
	if a, b := namespaceName("TestX"), namespaceName("TestX"); a == b {
		t.Errorf("namespaceName gave %q twice", a)
	}
}

// TestProvisionedFor picks, from `kubectl get persistentvolumes -o json`,
// the volumes a namespace's claims hold under the Delete policy.
func TestProvisionedFor(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
{"metadata":{"name":"pvc-a"},"spec":{"persistentVolumeReclaimPolicy":"Delete","claimRef":{"namespace":"ns1","name":"c"}}},
{"metadata":{"name":"pvc-b"},"spec":{"persistentVolumeReclaimPolicy":"Delete","claimRef":{"namespace":"ns2","name":"c"}}},
{"metadata":{"name":"kept"},"spec":{"persistentVolumeReclaimPolicy":"Retain","claimRef":{"namespace":"ns1","name":"d"}}},
{"metadata":{"name":"free"},"spec":{"persistentVolumeReclaimPolicy":"Delete"}}]}`
	got, err := provisionedFor([]byte(list), "ns1")
	if err != nil || len(got) != 1 || got[0] != "pvc-a" {
		t.Errorf("provisionedFor = %q, %v; want [pvc-a]", got, err)
	}
	if _, err := provisionedFor([]byte(`{"kind":"PersistentVolume"}`), "ns1"); err == nil {
		t.Error("a document that is not a List was read as one")
	}
}
