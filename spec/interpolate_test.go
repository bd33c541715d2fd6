package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInterpolate(t *testing.T) {
	vars := map[string]string{"SET": "value", "EMPTY": "", "NESTED": "inner"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	tests := []struct {
		in        string
		want      string
		sensitive bool
		vars      []string
		err       string
	}{
		{in: "plain", want: "plain"},
		{in: "$$HOME and $$", want: "$HOME and $"},
		{in: "${SET}", want: "value", sensitive: true, vars: []string{"SET"}},
		{in: "$SET/x", want: "value/x", sensitive: true, vars: []string{"SET"}},
		{in: "a-${SET}-b-${EMPTY:-}", want: "a-value-b-", sensitive: true, vars: []string{"SET", "EMPTY"}},
		{in: "${UNSET:-default}", want: "default", vars: []string{"UNSET"}},
		{in: "${EMPTY:-default}", want: "default", vars: []string{"EMPTY"}},
		{in: "${EMPTY-default}", want: "", sensitive: true, vars: []string{"EMPTY"}},
		{in: "${UNSET-default}", want: "default", vars: []string{"UNSET"}},
		{in: "${SET:-default}", want: "value", sensitive: true, vars: []string{"SET"}},
		{in: "${UNSET:-${NESTED}}", want: "inner", sensitive: true, vars: []string{"NESTED", "UNSET"}},
		{in: "${UNSET:-${ALSO_UNSET:-deep}}", want: "deep", vars: []string{"ALSO_UNSET", "UNSET"}},
		{in: "${SET:+alt}", want: "alt", vars: []string{"SET"}},
		{in: "${EMPTY:+alt}", want: "", vars: []string{"EMPTY"}},
		{in: "${EMPTY+alt}", want: "alt", vars: []string{"EMPTY"}},
		{in: "${UNSET+alt}", want: "", vars: []string{"UNSET"}},
		{in: "${SET:?must}", want: "value", sensitive: true, vars: []string{"SET"}},
		{in: "${EMPTY?must}", want: "", sensitive: true, vars: []string{"EMPTY"}},
		{in: "cost: 5$", want: "cost: 5$"},
		{in: "$1", want: "$1"},
		{in: "${UNSET}", err: `variable "UNSET" is not set (write ${UNSET:-default} to give a default)`},
		{in: "$UNSET", err: `variable "UNSET" is not set (write ${UNSET:-default} to give a default)`},
		{in: "${UNSET:?give it a value}", err: `required variable "UNSET" is not set: give it a value`},
		{in: "${EMPTY:?}", err: `required variable "EMPTY" is not set`},
		{in: "${UNSET?}", err: `required variable "UNSET" is not set`},
		{in: "${SET", err: `unterminated variable reference "${SET": missing }`},
		{in: "${}", err: `invalid variable reference ${}: expected a variable name`},
		{in: "${SET%x}", err: `invalid variable reference ${SET%x}: expected }, :-, -, :?, ?, :+ or + after "SET"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ip := &interpolator{lookup: lookup}
			got, err := ip.expand(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("expand(%q) error = %v, want %s", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(expansion{value: tt.want, sensitive: tt.sensitive, vars: tt.vars}, got, cmp.AllowUnexported(expansion{})); diff != "" {
				t.Errorf("expand(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestInterpolateOffline(t *testing.T) {
	ip := &interpolator{lookup: func(string) (string, bool) { return "", false }, offline: true}
	got, err := ip.expand("${A:?x}/${B}/${C:-c}")
	if err != nil {
		t.Fatal(err)
	}
	want := expansion{value: "//c", needed: []string{"A", "B"}, vars: []string{"A", "B", "C"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(expansion{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
