package spec_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

func TestRedact(t *testing.T) {
	vals := []spec.HostValue{{Var: "TOKEN", Value: "HuNtEr2"}, {Var: "MEM", Value: "3g"}, {Var: "LONG", Value: "HuNtEr2-and-more"}, {Var: "HOST", Value: "  HuNtEr2HoSt.io.  "}}
	tests := []struct{ name, in, want string }{
		{"quoted", `invalid name "HuNtEr2_x"`, `invalid name "(from $TOKEN)_x"`},
		{"lower-cased", `host "hunter2.example.com"`, `host "(from $TOKEN).example.com"`},
		{"upper-cased", `HUNTER2`, `(from $TOKEN)`},
		{"longest first", `HuNtEr2-and-more`, `(from $LONG)`},
		{"short alone", `--memory 3g --cpus 1`, `--memory (from $MEM) --cpus 1`},
		{"short inside a word stays", `33gb x3g`, `33gb x3g`},
		{"none", `nothing here`, `nothing here`},
		{"normalized host", `host "hunter2host.io"`, `host "(from $HOST)"`},
		{"a label alone", `label "  hunter2host" is not valid`, `label "  (from $HOST)" is not valid`},
		{"short parts stay", `a.io`, `a.io`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, spec.Redact(tt.in, vals)); diff != "" {
				t.Errorf("spec.Redact(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestRedactQuoted(t *testing.T) {
	vals := []spec.HostValue{{Var: "PORT", Value: "47213"}}
	got := spec.RedactQuoted(`, "containerPort": 47213, "x": 147213}`, vals)
	want := `, "containerPort": "(from $PORT)", "x": 147213}`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RedactQuoted (-want +got):\n%s", diff)
	}
}

// TestLoadRedactsHostValues plays the hostile agent: a declaration puts a
// host variable in fields whose checks quote the value they reject.
func TestLoadRedactsHostValues(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "sandbox.yaml", "version: 1\nname: ${S}_\nagent: ${S}\nresources: {memory: \"${S}\"}\nports: [\"${S}\"]\n")
	lookup := func(n string) (string, bool) {
		if n == "S" {
			return "SeCrEtVaLuE", true
		}
		return "", false
	}
	_, err := spec.Load([]string{p}, spec.Options{Schema: compile(t), LookupEnv: lookup})
	if err == nil {
		t.Fatal("want errors")
	}
	msg := err.Error()
	if strings.Contains(strings.ToLower(msg), "secretvalue") {
		t.Errorf("message quotes the host value:\n%s", msg)
	}
	if strings.Count(msg, "(from $S)") < 4 {
		t.Errorf("message does not say for each field where the value came from:\n%s", msg)
	}
}
