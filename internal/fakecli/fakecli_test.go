package fakecli

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, [][]string{{"SANDBOX", "AGENT", "STATUS", "PORTS", "WORKSPACE"}, {"claude-my-project", "claude", "running", "", "~/my-project"}, {"x", "", "", "", ""}}); err != nil {
		t.Fatal(err)
	}
	// docker-sandboxes-cli.md §2.5, first example, but for the SANDBOX
	// column (20 wide here, 21 there).
	want := "SANDBOX             AGENT    STATUS    PORTS   WORKSPACE\nclaude-my-project   claude   running           ~/my-project\nx\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResolve(t *testing.T) {
	known := [][]string{{"ls"}, {"policy", "allow", "network"}, {"policy", "ls"}}
	tests := []struct {
		args, path, rest []string
	}{
		{[]string{"--no-input", "policy", "allow", "network", "--sandbox", "x", "a.com"}, []string{"policy", "allow", "network"}, []string{"--no-input", "--sandbox", "x", "a.com"}},
		{[]string{"policy", "--cloud-api-url", "u", "ls", "--json"}, []string{"policy", "ls"}, []string{"--cloud-api-url", "u", "--json"}},
		{[]string{"policy", "bogus"}, []string{"policy"}, []string{"bogus"}},
		{[]string{"ls", "ls"}, []string{"ls"}, []string{"ls"}},
		{[]string{"--weird", "ls"}, nil, []string{"--weird", "ls"}},
	}
	for _, tt := range tests {
		path, rest := Resolve(tt.args, known, []string{"--no-input"}, []string{"--cloud-api-url"})
		if diff := cmp.Diff(tt.path, path); diff != "" {
			t.Errorf("Resolve(%q) path (-want +got):\n%s", tt.args, diff)
		}
		if diff := cmp.Diff(tt.rest, rest); diff != "" {
			t.Errorf("Resolve(%q) rest (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestFailRules(t *testing.T) {
	rules, err := ParseFail("create, policy  allow:2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]FailRule{{Verb: "create"}, {Verb: "policy allow", N: 2}}, rules); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if _, err := ParseFail("create:0"); err == nil {
		t.Error("create:0 parsed")
	}
	st := fakestate.New()
	var got []bool
	for range 3 {
		got = append(got, CountCall(st, []string{"policy", "allow", "network"}, rules))
	}
	got = append(got, CountCall(st, []string{"create"}, rules))
	if diff := cmp.Diff([]bool{false, true, false, true}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"policy": 3, "policy allow": 3, "policy allow network": 3, "create": 1}, st.Calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestVersion(t *testing.T) {
	for _, tt := range []struct {
		v, min string
		want   bool
	}{{"0.53.0", "0.42.0", true}, {"v0.41.9", "0.42.0", false}, {"0.42.0-rc5", "0.42.0", true}, {"1.0", "0.99.99", true}} {
		v, err := ParseVersion(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.AtLeast(tt.min); got != tt.want {
			t.Errorf("%s.AtLeast(%s) = %v", tt.v, tt.min, got)
		}
	}
}

func TestEnv(t *testing.T) {
	var e Env
	getenv := func(k string) string { return map[string]string{"HOSTVAR": "h"}[k] }
	for _, s := range []string{"A=1", "HOSTVAR", "UNSET", "A=2", "B=x=y"} {
		if err := e.AddSpec(s, getenv); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"A=2", "B=x=y", "HOSTVAR=h"}, e.List()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := e.AddSpec("=x", getenv); err == nil {
		t.Error("=x accepted")
	}
}
