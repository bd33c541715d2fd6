package kubernetes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkewCheck reads kubectl version -o json as recorded on the test
// cluster (Kubernetes v1.35.4) with two kubectls (testdata/version: the
// machine's v1.32.4-dispatcher on PATH, and the cluster's v1.35.4), and
// variants of it: beyond one minor version either way is a warning naming
// both versions; other shapes are errors.
func TestSkewCheck(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "version", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	old, same := read("kubectl-1.32.json"), read("kubectl-1.35.json")
	withClient := func(v string) string {
		return strings.Replace(same, `"gitVersion": "v1.35.4"`, `"gitVersion": "`+v+`"`, 1)
	}
	for _, tc := range []struct {
		name, doc string
		warn      bool
	}{
		{"recorded 1.32 against 1.35", old, true},
		{"recorded 1.35 against 1.35", same, false},
		{"one older", withClient("v1.34.2"), false},
		{"one newer", withClient("v1.36.0"), false},
		{"two newer", withClient("v1.37.0"), true},
		{"another major", withClient("v2.35.0"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := parseVersions([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			c := vs.skewCheck("kubectl")
			if c.Warn != tc.warn || c.OK == tc.warn {
				t.Errorf("Warn %v OK %v, want Warn %v: %s", c.Warn, c.OK, tc.warn, c.Detail)
			}
			if !strings.Contains(c.Detail, vs.clientGit) || !strings.Contains(c.Detail, vs.serverGit) {
				t.Errorf("the check does not name both versions: %s", c.Detail)
			}
		})
	}
	if vs, _ := parseVersions([]byte(old)); vs.clientGit != "v1.32.4-dispatcher" || vs.serverGit != "v1.35.4" {
		t.Errorf("recorded versions read as %q %q", vs.clientGit, vs.serverGit)
	}
	for name, doc := range map[string]string{
		"no server":           `{"clientVersion":{"gitVersion":"v1.35.4"}}`,
		"gitVersion a number": `{"clientVersion":{"gitVersion":1},"serverVersion":{"gitVersion":"v1.35.4"}}`,
		"not a version":       `{"clientVersion":{"gitVersion":"v0.0.0-master+$Format:%H$x"},"serverVersion":{"gitVersion":"master"}}`,
		"not JSON":            `Client Version: v1.35.4`,
	} {
		if _, err := parseVersions([]byte(doc)); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "kubectl version -o json") {
			t.Errorf("%s: the error does not name the command: %v", name, err)
		}
	}
}
