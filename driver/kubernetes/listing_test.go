package kubernetes

import (
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
)

// TestListedItem: an item's spec and status are kept raw where its kind
// has them read, skipped where it does not (when the kind comes first,
// as kubectl prints it), and kept when the kind comes after them; a
// malformed item is an error, not an empty one.
func TestListedItem(t *testing.T) {
	type kept struct{ Kind, Name, Spec, Status string }
	for _, tc := range []struct {
		name, item string
		want       kept
		err        string
	}{
		{name: "sandbox", item: `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"a"},"spec":{"operatingMode":"Running"},"status":{"podIPs":["192.0.2.1"]}}`,
			want: kept{"Sandbox", "a", `{"operatingMode":"Running"}`, `{"podIPs":["192.0.2.1"]}`}},
		{name: "pod spec skipped", item: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a.egress"},"spec":{"containers":[{"name":"egress"}]},"status":{"podIP":"192.0.2.2"}}`,
			want: kept{"Pod", "a.egress", "", `{"podIP":"192.0.2.2"}`}},
		{name: "policy skipped", item: `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p"},"spec":{"podSelector":{}}}`,
			want: kept{"NetworkPolicy", "p", "", ""}},
		{name: "kind after spec", item: `{"spec":{"containers":[]},"status":{"podIP":"192.0.2.2"},"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}`,
			want: kept{"Pod", "a", `{"containers":[]}`, `{"podIP":"192.0.2.2"}`}},
		{name: "unknown fields", item: `{"kind":"Pod","metadata":{"name":"a","uid":"x"},"extra":[1,{"b":null}]}`,
			want: kept{"Pod", "a", "", ""}},
		{name: "not an object", item: `["Pod"]`, err: "not an object"},
		{name: "kind twice", item: `{"kind":"Pod","kind":"Sandbox"}`, err: "duplicate"},
		// The library words this error at random ("cannot" or "unable
		// to"), so as not to be matched on: the JSON pointer is stable.
		{name: "kind not a string", item: `{"kind":7}`, err: `within "/kind"`},
		{name: "cut short", item: `{"kind":"Pod","spec":{`, err: "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var it listedItem
			err := jsonv2.Unmarshal([]byte(tc.item), &it)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := kept{it.Kind, it.Metadata.Name, string(it.Spec), string(it.Status)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("item (-want +got):\n%s", diff)
			}
		})
	}
}
