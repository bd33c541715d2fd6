package cliutil

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDoc(t *testing.T) {
	calls := 0
	src := Source{Command: "x ls --json", Version: func() string { calls++; return "x 1.2.3" }}
	type row struct {
		Name  string
		Tags  []string
		N     int
		On    bool
		Via   string
		Kind  string
		Extra bool
	}
	read := func(out string) ([]row, error) {
		doc, root := Decode(src, []byte(out))
		var rows []row
		for _, e := range root.Object().Field("items").Array(func(i int) string { return "item " + string(rune('1'+i)) }) {
			o := e.Object()
			r := row{Name: o.Field("name").String(), Tags: o.Field("tags").Strings(), N: o.Field("n").Int(), On: o.Field("on").Bool(),
				Kind: o.Field("kind").OneOf("a", "b"), Extra: o.Has("extra")}
			if p, ok := o.Opt("prov"); ok {
				r.Via = p.Object().Field("via").String()
			}
			rows = append(rows, r)
		}
		return rows, doc.Err()
	}
	ok := `notice
{"items":[{"name":"a","tags":["t"],"n":3,"on":true,"kind":"a","prov":{"via":"added"},"unknown":[1,2]},{"name":"b","tags":[],"n":0,"on":false,"kind":"b","extra":1,"prov":null}]}
banner after`
	rows, err := read(ok)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]row{{"a", []string{"t"}, 3, true, "added", "a", false}, {"b", []string{}, 0, false, "", "b", true}}, rows); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if calls != 0 {
		t.Errorf("the version was asked for without an error")
	}
	for _, tt := range []struct{ out, want string }{
		{`[]`, `x ls --json (x 1.2.3): expected an object, got an array`},
		{`{}`, `x ls --json (x 1.2.3): field "items": missing`},
		{`{"items":[{"tags":[],"n":1,"on":true,"kind":"a"}]}`, `x ls --json (x 1.2.3): item 1: field "name": missing`},
		{`{"items":[{"name":"a","tags":["x",2],"n":1,"on":true,"kind":"a"}]}`, `x ls --json (x 1.2.3): item 1: field "tags": expected an array of strings, got a number at index 1`},
		{`{"items":[{"name":"a","tags":[],"n":1.5,"on":true,"kind":"a"}]}`, `x ls --json (x 1.2.3): item 1: field "n": expected an integer, got 1.5`},
		{`{"items":[{"name":"a","tags":[],"n":1,"on":"yes","kind":"a"}]}`, `x ls --json (x 1.2.3): item 1: field "on": expected a boolean, got a string`},
		{`{"items":[{"name":"a","tags":[],"n":1,"on":true,"kind":"c"}]}`, `x ls --json (x 1.2.3): item 1: field "kind": unknown value "c" (known: a, b)`},
		{`{"items":[{"name":"a","tags":[],"n":1,"on":true,"kind":"a","prov":{"via":7}}]}`, `x ls --json (x 1.2.3): item 1: field "prov.via": expected a string, got a number`},
		{`{"items":[{"name":"a","tags":[],"n":1,"on":true,"kind":"a","prov":[]}]}`, `x ls --json (x 1.2.3): item 1: field "prov": expected an object, got an array`},
		// The first problem is the one reported.
		{`{"items":[{"name":1},{"name":2}]}`, `x ls --json (x 1.2.3): item 1: field "name": expected a string, got a number`},
		{"Daemon not running\n", `x ls --json (x 1.2.3): no JSON in output "Daemon not running"`},
		{`{"items":[`, `x ls --json (x 1.2.3): cannot parse JSON output: unexpected EOF`},
	} {
		_, err := read(tt.out)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.out, got, tt.want)
		}
	}
}
