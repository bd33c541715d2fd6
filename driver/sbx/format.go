package sbx

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/netlog"
)

// The formats of Docker's sbx the driver reads, from live captures
// (docker-sbx-evidence.md, cited per parser). Each parser is strict: a
// required field that is missing or of another type is an error naming the
// command, the backend version and the field; fields it does not read, and
// notices around the JSON, are fine.

// sandbox is one entry of `sbx ls --json`.
type sandbox struct {
	Name, Agent, Status string
	Workspaces          []string
	Ports               []binding
}

// binding is one published host binding.
type binding struct {
	HostIP      string
	HostPort    int
	SandboxPort int
	Protocol    string
}

// protocols are the binding protocols sbx knows (ports --publish help).
var protocols = []string{"tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"}

// parseList reads `sbx ls --json` (evidence §1.1: {"sandboxes": [...]},
// issue #201 at v0.31.3 through the v0.47.0 captures). Every entry needs a
// name; an entry want selects also needs agent, status and workspaces
// (ports are optional, §1.1 [3P]), so a sandbox sbx does not manage cannot
// fail a plan. With an error, the list holds what could be read (the probe
// still redacts those names).
func parseList(src cliutil.Source, out []byte, want func(string) bool) ([]sandbox, error) {
	doc, root := cliutil.Decode(src, out)
	var list []sandbox
	for _, e := range root.Object().Field("sandboxes").Array(func(i int) string { return fmt.Sprintf("sandbox %d", i+1) }) {
		o := e.Object()
		s := sandbox{Name: o.Field("name").String()}
		if !want(s.Name) {
			continue
		}
		s.Agent = o.Field("agent").String()
		s.Status = o.Field("status").String()
		s.Workspaces = o.Field("workspaces").Strings()
		if p, ok := o.Opt("ports"); ok {
			s.Ports = readBindings(p)
		}
		list = append(list, s)
	}
	return list, doc.Err()
}

func readBindings(v cliutil.Value) []binding {
	var out []binding
	for _, e := range v.Array(func(i int) string { return fmt.Sprintf("port %d", i+1) }) {
		o := e.Object()
		out = append(out, binding{HostIP: o.Field("host_ip").String(), HostPort: o.Field("host_port").Int(),
			SandboxPort: o.Field("sandbox_port").Int(), Protocol: o.Field("protocol").OneOf(protocols...)})
	}
	return out
}

// parsePorts reads `sbx ports NAME --json`: a bare array of
// {host_ip, host_port, sandbox_port, protocol} (evidence §1.3,
// [3P-measured v0.47.0]).
func parsePorts(src cliutil.Source, out []byte) ([]binding, error) {
	doc, root := cliutil.Decode(src, out)
	b := readBindings(root)
	return b, doc.Err()
}

// rule is one rule of `sbx policy ls [NAME] --json`.
type rule struct {
	ID, Name, Scope, Type, Decision, Status string
	// CreatedVia is provenance.created_via ("added", "default",
	// "provisioned"); "" before 0.47, which does not print it.
	CreatedVia string
	Resources  []string
	Editable   bool
}

// parsePolicy reads `sbx policy ls [NAME] --json` (evidence §1.2, four live
// captures, v0.35.0 to v0.47.0): {"rules": [{id, name, policy_id, scope
// ("global" | "sandbox:NAME"), applies_to, resource_type, decision,
// resources[], origin, layer, status, editable, sandbox_id, provenance:
// {created_via}, actions}]}. Read: id, scope, resource_type, decision,
// resources, status and editable (in every capture); name and provenance
// when present. Governed accounts add top-level keys, which are ignored.
func parsePolicy(src cliutil.Source, out []byte) ([]rule, error) {
	doc, root := cliutil.Decode(src, out)
	var rules []rule
	for _, e := range root.Object().Field("rules").Array(func(i int) string { return fmt.Sprintf("rule %d", i+1) }) {
		o := e.Object()
		r := rule{ID: o.Field("id").String(), Scope: o.Field("scope").String(), Type: o.Field("resource_type").String(),
			Decision: o.Field("decision").OneOf("allow", "deny"), Resources: o.Field("resources").Strings(),
			Status: o.Field("status").String(), Editable: o.Field("editable").Bool()}
		if v, ok := o.Opt("name"); ok {
			r.Name = v.String()
		}
		if v, ok := o.Opt("provenance"); ok {
			r.CreatedVia = v.Object().Field("created_via").String()
		}
		rules = append(rules, r)
	}
	return rules, doc.Err()
}

// check is `sbx policy check network ... --json`.
type check struct {
	Allowed bool
	Rule    string
}

// parseCheck reads `sbx policy check network [--sandbox S] TARGET --json`
// (evidence §3.11, the v0.47.0 captures 09-check-*.json): "allowed" always;
// "rule" only on an explicit decision. The command exits 1 on a denial,
// which is an answer, not a failure.
func parseCheck(src cliutil.Source, out []byte) (check, error) {
	doc, root := cliutil.Decode(src, out)
	o := root.Object()
	c := check{Allowed: o.Field("allowed").Bool()}
	if v, ok := o.Opt("rule"); ok {
		c.Rule = v.String()
	}
	return c, doc.Err()
}

// logEntry is one host of `sbx policy log --json`.
type logEntry struct {
	Host, VMName string
	Entry        netlog.Entry
}

// parseLog reads `sbx policy log [NAME] --json` (evidence §1.6,
// [3P-measured v0.47.0, v0.38.0]): {"blocked_hosts": [...],
// "allowed_hosts": [...]}, entries {host, vm_name, proxy_type, rule, since,
// last_seen, count_since, reason}; host is HOST:PORT ("example.com:443").
// host and vm_name are needed; the others are read where present. Times
// are kept as Docker's sbx writes them.
func parseLog(src cliutil.Source, out []byte) ([]logEntry, error) {
	doc, root := cliutil.Decode(src, out)
	o := root.Object()
	var entries []logEntry
	for _, key := range []string{"blocked_hosts", "allowed_hosts"} {
		decision := map[string]string{"blocked_hosts": "deny", "allowed_hosts": "allow"}[key]
		for _, e := range o.Field(key).Array(func(i int) string { return fmt.Sprintf("%s entry %d", strings.TrimSuffix(key, "_hosts"), i+1) }) {
			eo := e.Object()
			le := logEntry{Host: eo.Field("host").String(), VMName: eo.Field("vm_name").String()}
			n := netlog.Entry{Decision: decision, Host: le.Host}
			if h, p, err := net.SplitHostPort(le.Host); err == nil {
				if port, err := strconv.Atoi(p); err == nil {
					n.Host, n.Port = h, port
				}
			}
			for _, f := range []struct {
				key string
				dst *string
			}{{"rule", &n.Rule}, {"since", &n.Since}, {"last_seen", &n.Time}, {"reason", &n.Reason}} {
				if v, ok := eo.Opt(f.key); ok {
					*f.dst = v.String()
				}
			}
			if v, ok := eo.Opt("proxy_type"); ok {
				_ = v.String()
			}
			if v, ok := eo.Opt("count_since"); ok {
				n.Count = v.Int()
			}
			le.Entry = n
			entries = append(entries, le)
		}
	}
	return entries, doc.Err()
}

// secretList is `sbx secret ls --json`: the stored secrets' scopes and
// names, never their (masked) values.
type secretList struct {
	Secrets []storedSecret
	Custom  []customSecret
}

// storedSecret is one entry of "secrets": a service or registry secret.
type storedSecret struct{ Scope, Type, Name string }

// customSecret is one entry of "custom_secrets".
type customSecret struct {
	Scope, Env, Placeholder string
	Targets                 []string
}

// parseSecrets reads `sbx secret ls --json` (evidence §1.4, [3P-measured]
// sbx-go-sdk secret/secret.go and a parser at v0.42.1): {"secrets":
// [{scope ("global" | "host-only" | the sandbox's name), type ("service" |
// "registry"), name, secret (masked), username?, kind?, source?,
// refresh?}], "custom_secrets": [{scope, targets[], env, placeholder,
// secret, kind?, source?, refresh?}]}. "The CLI prints both keys even when
// a scope holds nothing", so both are required, as are scope, type and
// name, and scope, targets, env and placeholder. type is read as any
// string: Docker's MCP gateway keeps secrets of its own in the store
// (names starting "mcp:", credentials-local.md), of a type no capture
// shows, and only "service" entries are sbx's business. The masked values
// are never read.
func parseSecrets(src cliutil.Source, out []byte) (secretList, error) {
	doc, root := cliutil.Decode(src, out)
	o := root.Object()
	var l secretList
	for _, e := range o.Field("secrets").Array(func(i int) string { return fmt.Sprintf("secret %d", i+1) }) {
		so := e.Object()
		l.Secrets = append(l.Secrets, storedSecret{Scope: so.Field("scope").String(), Type: so.Field("type").String(), Name: so.Field("name").String()})
	}
	for _, e := range o.Field("custom_secrets").Array(func(i int) string { return fmt.Sprintf("custom secret %d", i+1) }) {
		co := e.Object()
		l.Custom = append(l.Custom, customSecret{Scope: co.Field("scope").String(), Targets: co.Field("targets").Strings(),
			Env: co.Field("env").String(), Placeholder: co.Field("placeholder").String()})
	}
	if err := doc.Err(); err != nil {
		return secretList{}, err
	}
	return l, nil
}

// parseHelp reads the root help (`sbx --help`, cobra) and reports whether
// the global --no-input flag is listed. A help without cobra's "-h,
// --help" line is not a help sbx knows.
func parseHelp(src cliutil.Source, out []byte) (noInput bool, err error) {
	help := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, ",", " "))
		if len(f) == 0 || !strings.HasPrefix(f[0], "-") {
			continue
		}
		for _, w := range f {
			switch w {
			case "--help":
				help = true
			case "--no-input":
				noInput = true
			}
			if !strings.HasPrefix(w, "-") {
				break
			}
		}
	}
	if !help {
		return false, fmt.Errorf("%s: no flags section listing -h, --help", src)
	}
	return noInput, nil
}

// hostOf is the host of a resource or log entry ("api.example.com:443",
// "[::1]:443", "**.example.com"), for redaction.
func hostOf(res string) string {
	if strings.HasPrefix(res, "[") {
		if i := strings.Index(res, "]"); i > 0 {
			return res[1:i]
		}
	}
	if h, port, ok := strings.Cut(res, ":"); ok && !strings.Contains(port, ":") {
		return strings.TrimLeft(h, "*.")
	}
	return strings.TrimLeft(res, "*.")
}

// exitErr is a probe's verdict on a command that failed.
type exitErr int

func (e exitErr) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
