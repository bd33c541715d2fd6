package spec_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/spec"
)

// TestDefaultBlockCIDRsDocumented: the schema's first example of
// network.blockCIDRs and sandbox.yaml.example both show the default list,
// as they say they do, so that copying either never drops a range.
func TestDefaultBlockCIDRsDocumented(t *testing.T) {
	sch := compile(t)
	var ex any = sch.Raw()
	for _, key := range []string{"properties", "network", "properties", "blockCIDRs", "examples"} {
		m, _ := ex.(map[string]any)
		ex = m[key]
	}
	list, _ := ex.([]any)
	if len(list) == 0 {
		t.Fatal("network.blockCIDRs has no examples")
	}
	var first []string
	for _, v := range list[0].([]any) {
		first = append(first, v.(string))
	}
	if diff := cmp.Diff(spec.DefaultBlockCIDRs, first); diff != "" {
		t.Errorf("schema example (-default +example):\n%s", diff)
	}
	res, err := spec.Load([]string{"../sandbox.yaml.example"}, spec.Options{Schema: sch, LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	var want, got []netip.Prefix
	for _, s := range spec.DefaultBlockCIDRs {
		want = append(want, netip.MustParsePrefix(s))
	}
	got = res.Specs[0].Network.BlockCIDRs
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("sandbox.yaml.example (-default +example):\n%s", diff)
	}
}
