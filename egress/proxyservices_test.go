package egress

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestProxyServices: a service's declared port is reached by name over
// the service's parked connections (nothing is resolved or dialled);
// another port of the service is refused, even under policy allow; a
// deny rule for the name wins; a name that is no service goes the usual
// way.
func TestProxyServices(t *testing.T) {
	_, port := upstream(t)
	p := atoi(port)
	pol := testPolicy()
	pol.Services = map[string][]int{"db": {p}}
	h := newHarness(t, pol, fakeDNS{})
	dir, err := os.MkdirTemp("", "ps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := h.proxy.ServeServiceSockets(ctx, dir); err != nil {
		t.Fatal(err)
	}
	// The service's side: its init parks connections and dials its own
	// loopback, where the upstream listens.
	parked := make(chan struct{})
	go func() { ParkPorts(ctx, ServiceSocket(dir, "db")); close(parked) }()
	t.Cleanup(func() { cancel(); <-parked })

	code, body := h.get("http://db:" + port + "/x")
	if code != 200 || body != "hello from db:"+port {
		t.Errorf("the service's port: %d %q", code, body)
	}
	line, c := h.connect("db:" + port)
	if !strings.Contains(line, "200") {
		t.Errorf("CONNECT to the service's port: %q", line)
	}
	c.Close()
	if code, body := h.get("http://db:" + strconv.Itoa(p+1) + "/"); code != 403 || !strings.Contains(body, "not a port of service db") {
		t.Errorf("another port of the service: %d %q", code, body)
	}
	if dialed, lookups := h.seen(); len(dialed) > 0 || len(lookups) > 0 {
		t.Errorf("dialled %v, resolved %v", dialed, lookups)
	}
	pol = Policy{Default: "allow", Services: map[string][]int{"db": {p}}}
	h.writePolicy(pol)
	if err := h.proxy.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.get("http://db:" + strconv.Itoa(p+1) + "/"); code != 403 {
		t.Errorf("another port of the service under policy allow: %d", code)
	}
	pol = Policy{Default: "deny", Deny: []string{"db"}, Services: map[string][]int{"db": {p}}}
	h.writePolicy(pol)
	if err := h.proxy.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.get("http://db:" + port + "/"); code != 403 {
		t.Errorf("a denied service: %d", code)
	}
}

// TestProxyServiceNames: a policy naming a service that is not a DNS
// label is refused whole.
func TestProxyServiceNames(t *testing.T) {
	for _, name := range []string{"", "a.b", "Db", "-db", strings.Repeat("a", 64), "host.docker.internal"} {
		pol := Policy{Default: "deny", Services: map[string][]int{name: {5432}}}
		if _, err := pol.compile(); err == nil {
			t.Errorf("service %q compiled", name)
		}
	}
}
