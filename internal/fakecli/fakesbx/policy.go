package fakesbx

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// presetRules are the global rules `policy init PRESET` writes, all with
// created_via "default". Evidence §1.2 [3P-measured v0.47.0]: balanced is
// six network groups (the ids below; the first resources of
// default-ai-services and default-package-managers are the capture's, the
// rest are invented) and two filesystem rules allowing every path;
// default-deny-all is the global network fallback that only the unscoped
// listing shows. The allow-all preset's representation is UNCONFIRMED; the
// fake makes it a global "**" allow.
func presetRules(preset string) []fakestate.Rule {
	group := func(name, decision string, resources ...string) fakestate.Rule {
		return fakestate.Rule{ID: name, Name: name, Decision: decision, Resources: resources, Via: "default"}
	}
	var rules []fakestate.Rule
	switch preset {
	case "balanced":
		rules = append(rules,
			group("default-ai-services", "allow", "api.anthropic.com:443", "statsig.anthropic.com:443", "platform.claude.com:443", "**.openai.com:443"),
			group("default-package-managers", "allow", "registry.npmjs.org:443", "pypi.org:443", "proxy.golang.org:443"),
			group("default-code-and-containers", "allow", "github.com:443", "**.githubusercontent.com:443", "registry-1.docker.io:443"),
			group("default-os-packages", "allow", "deb.debian.org:443", "archive.ubuntu.com:443"),
			group("default-cloud-infrastructure", "allow", "**.amazonaws.com:443"),
			group("default-cert-validation", "allow", "ocsp.digicert.com:80"))
	case "allow-all":
		rules = append(rules, group("default-allow-all", "allow", "**"))
	}
	if preset != "allow-all" {
		fallback := group("default-deny-all", "deny", "**")
		fallback.Fallback = true
		rules = append(rules, fallback)
	}
	read := group("default-fs-read-allow-all", "allow", "/**")
	read.Type = "filesystem:read"
	write := group("default-fs-write-allow-all", "allow", "/**")
	write.Type = "filesystem:write"
	return append(rules, read, write)
}

// ruleJSON is one rule of `sbx policy ls [NAME] --json` (evidence §1.2,
// four live captures): a scoped rule has origin "scoped" and
// scope/applies_to "sandbox:NAME"; a global one scope "global",
// applies_to "all". layer, provenance and actions appear in the v0.47.0
// captures, not in the v0.35.0/v0.38.0 ones.
type ruleJSON struct {
	ID           string      `json:"id"`
	Name         string      `json:"name"`
	PolicyID     string      `json:"policy_id"`
	Scope        string      `json:"scope"`
	AppliesTo    string      `json:"applies_to"`
	ResourceType string      `json:"resource_type"`
	Decision     string      `json:"decision"`
	Resources    []string    `json:"resources"`
	Origin       string      `json:"origin"`
	Layer        string      `json:"layer,omitempty"`
	Status       string      `json:"status"`
	Editable     bool        `json:"editable"`
	SandboxID    string      `json:"sandbox_id,omitempty"`
	Provenance   *provenance `json:"provenance,omitempty"`
	Actions      []string    `json:"actions,omitempty"`
}

type provenance struct {
	CreatedVia string `json:"created_via"`
}

// scopedRule is a rule with the sandbox it is scoped to ("" for global).
type scopedRule struct {
	fakestate.Rule
	sandbox string
}

func (a *app) ruleJSON(r scopedRule) ruleJSON {
	j := ruleJSON{ID: r.ID, Name: r.Name, PolicyID: "local-policy", Scope: "global", AppliesTo: "all",
		ResourceType: r.ResourceType(), Decision: r.Decision, Resources: r.Resources, Origin: "local",
		Status: "active", Editable: !r.Fixed}
	if j.Name == "" {
		j.Name = r.ID
	}
	if r.sandbox != "" {
		j.PolicyID = fakestate.UUID("policy:"+r.sandbox, 0)
		j.Scope, j.AppliesTo, j.Origin, j.SandboxID = "sandbox:"+r.sandbox, "sandbox:"+r.sandbox, "scoped", r.sandbox
	}
	if a.Version.AtLeast(vCaptured) {
		j.Layer = "local"
		j.Provenance = &provenance{CreatedVia: r.Via}
		if j.ResourceType == "network" {
			j.Actions = []string{"net:connect:tcp"}
			if strings.Contains(r.Protocol, "udp") {
				j.Actions = append(j.Actions, "net:connect:udp")
			}
		}
	}
	return j
}

// rules lists what `policy ls [NAME]` shows: every rule when unscoped; a
// sandbox's own rules and the global ones but the fallback for NAME
// (evidence §1.2: "A sandbox's listing carries the global filesystem rules
// but not the global network fallback").
func rulesFor(st *fakestate.State, sb *fakestate.Sandbox, all bool) []scopedRule {
	var out []scopedRule
	if sb != nil {
		for _, r := range sb.Network.Rules {
			out = append(out, scopedRule{r, sb.Name})
		}
	}
	if all {
		for _, s := range st.Sandboxes {
			for _, r := range s.Network.Rules {
				out = append(out, scopedRule{r, s.Name})
			}
		}
	}
	for _, r := range st.Policy.Rules {
		if all || !r.Fallback {
			out = append(out, scopedRule{r, ""})
		}
	}
	return out
}

// scopeOf returns the rule list --sandbox selects and its scope text.
func (a *app) scopeOf(st *fakestate.State, sandbox string) (*[]fakestate.Rule, string, error) {
	if sandbox == "" {
		return &st.Policy.Rules, "global", nil
	}
	sb, err := a.lookup(st, sandbox)
	if err != nil {
		return nil, "", err
	}
	return &sb.Network.Rules, "sandbox:" + sb.Name, nil
}

// policyAdd is `sbx policy allow|deny network [--sandbox S] RESOURCES`: one
// rule holding every resource of the comma-separated list. Allow covers
// TCP, deny TCP and UDP, unless --protocol (0.45.0). It prints `Rule added
// to policy local (scope: sandbox:NAME): ID (RESOURCES [tcp])` (evidence
// §2.1, v0.47.0) and refuses a deny of a resource an allow of the same
// scope names: `deny: "example.com" conflicts with existing allow rule
// "<uuid>"` (v0.47.0 capture). Whether a "**" allow conflicts with a later
// deny is unknown; the fake compares resources as written.
func (a *app) policyAdd(args []string) error {
	decision := a.Path[1]
	fs := fakecli.Flags("policy " + decision + " network")
	sandbox := fs.String("sandbox", "", "Add the rule to policy \"local\" scoped to a single sandbox")
	protocol := new(string)
	if a.Version.AtLeast(vConfirm) {
		fs.StringVar(protocol, "protocol", "", "tcp|udp|tcp,udp")
	}
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	resources := splitList(args[0])
	if len(resources) == 0 {
		return errf("no resources given")
	}
	if *protocol == "" {
		*protocol = map[string]string{"allow": "tcp", "deny": "tcp,udp"}[decision]
	}
	if !slices.Contains([]string{"tcp", "udp", "tcp,udp"}, *protocol) {
		return errf("invalid --protocol %q: must be tcp, udp or tcp,udp", *protocol)
	}
	var id, scope string
	if err := a.Store.Update(func(st *fakestate.State) error {
		rules, s, err := a.scopeOf(st, *sandbox)
		if err != nil {
			return err
		}
		scope = s
		if decision == "deny" {
			for _, res := range resources {
				for _, r := range *rules {
					if r.Decision == "allow" && slices.Contains(r.Resources, res) {
						return errf("deny: %q conflicts with existing allow rule %q", res, r.ID)
					}
				}
			}
		}
		id = st.NewID("rule")
		*rules = append(*rules, fakestate.Rule{ID: id, Decision: decision, Resources: resources, Via: "added", Protocol: *protocol})
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(a.Stdout, "Rule added to policy local (scope: %s): %s (%s [%s])\n", scope, id, strings.Join(resources, ", "), *protocol)
	return nil
}

// policyRm is `sbx policy rm network [--sandbox S] --id ID | --resource R`
// (docker-sandboxes-cli.md §1.3). Since 0.45.0 it asks first unless
// -f/--force (evidence §0 #3; the 0.38.0 capture removed by ID without
// asking). A kit's rule "cannot be removed by ID" (evidence §1.2). By
// resource it drops the named resources from the rules holding them
// (UNCONFIRMED for a rule with several). Error wordings are UNCONFIRMED.
func (a *app) policyRm(args []string) error {
	fs := fakecli.Flags("policy rm network")
	sandbox := fs.String("sandbox", "", "Sandbox whose rules to remove")
	id := fs.String("id", "", "Remove by rule ID")
	resource := fs.String("resource", "", "Remove by resource value(s), comma-separated")
	force := new(bool)
	if a.Version.AtLeast(vConfirm) {
		fs.BoolVarP(force, "force", "f", false, "Skip confirmation prompts")
	}
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	if (*id == "") == (*resource == "") {
		return errf("exactly one of --id or --resource is required")
	}
	return a.Store.Update(func(st *fakestate.State) error {
		rules, _, err := a.scopeOf(st, *sandbox)
		if err != nil {
			return err
		}
		kept := []fakestate.Rule{}
		removed := 0
		for _, r := range *rules {
			switch {
			case *id != "" && r.ID == *id && r.Fixed:
				return errf("rule %q is provisioned by a kit and cannot be removed", r.ID)
			case *id != "" && r.ID == *id:
				removed++
				continue
			case *id == "" && !r.Fixed && r.Via != "default":
				left := slices.DeleteFunc(slices.Clone(r.Resources), func(x string) bool { return slices.Contains(splitList(*resource), x) })
				if len(left) < len(r.Resources) {
					removed++
					if len(left) == 0 {
						continue
					}
					r.Resources = left
				}
			}
			kept = append(kept, r)
		}
		if removed == 0 {
			if *id != "" {
				return errf("rule %q not found", *id)
			}
			return errf("no rule matches %q", *resource)
		}
		if a.Version.AtLeast(vConfirm) {
			what := *id
			if what == "" {
				what = *resource
			}
			ok, err := a.confirm(*force, fmt.Sprintf("Remove rule %s?", what), "sbx policy rm network ... --force")
			if err != nil {
				return err
			}
			if !ok {
				return errf("cancelled")
			}
		}
		*rules = kept
		return nil
	})
}

// matches reports whether a rule resource (evidence §2.1 grammar: exact,
// *.domain, **.domain, globs, host:port, [v6]:port, an IP, a CIDR, "**")
// matches target "host:port". A resource without a port covers every port
// ([3P-measured v0.38.0]).
func matches(pattern, target string) bool {
	if pattern == "**" {
		return true
	}
	th, tp := splitHostPort(target)
	if pfx, err := netip.ParsePrefix(pattern); err == nil {
		ip, err := netip.ParseAddr(th)
		return err == nil && pfx.Contains(ip)
	}
	ph, pp := splitHostPort(pattern)
	if pp != "" && pp != tp {
		return false
	}
	switch {
	case strings.HasPrefix(ph, "**."):
		return strings.HasSuffix(th, ph[2:])
	case strings.HasPrefix(ph, "*."):
		rest, ok := strings.CutSuffix(th, ph[1:])
		return ok && rest != "" && !strings.Contains(rest, ".")
	}
	ok, err := path.Match(ph, th)
	return err == nil && ok
}

// splitHostPort splits "host:port", "[v6]:port", "v6" or "host".
func splitHostPort(s string) (host, port string) {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i > 0 {
			return s[1:i], strings.TrimPrefix(s[i+1:], ":")
		}
	}
	if strings.Count(s, ":") == 1 {
		h, p, _ := strings.Cut(s, ":")
		return h, p
	}
	return s, ""
}

// checkJSON is `sbx policy check network --json` (evidence §3.11, the
// v0.47.0 captures 09-check-*.json): an allowed target carries no rule; an
// explicit denial names "local:<id>"; an implicit one has neither origin
// nor rule.
type checkJSON struct {
	Action        string         `json:"action"`
	Allowed       bool           `json:"allowed"`
	Context       string         `json:"context"`
	DenyKind      string         `json:"deny_kind,omitempty"`
	Governance    map[string]any `json:"governance"`
	Origin        string         `json:"origin,omitempty"`
	Reason        string         `json:"reason,omitempty"`
	ResourceType  string         `json:"resource_type"`
	ResourceValue string         `json:"resource_value"`
	Rule          string         `json:"rule,omitempty"`
	Target        string         `json:"target"`
	Type          string         `json:"type"`
}

// policyCheck is `sbx policy check network [--sandbox S] TARGET` (0.35.0;
// --json 0.42.0): "evaluates the same daemon-side policy authorizer", a
// host without a port is checked on 443, deny wins, a target no rule
// allows is an implicit denial; exit 1 on a denial. Text: `Allowed: H` /
// `Denied: H` (docker-sandboxes-cli.md §1.3).
func (a *app) policyCheck(args []string) error {
	fs := fakecli.Flags("policy check network")
	sandbox := fs.String("sandbox", "", "Check for one sandbox")
	fs.String("protocol", "", "tcp|udp")
	jsonFlag := new(bool)
	if a.Version.AtLeast(vJSON) {
		fs.BoolVar(jsonFlag, "json", false, "Output in JSON format")
	}
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	target := args[0]
	if _, port := splitHostPort(target); port == "" {
		target += ":443"
	}
	res := checkJSON{Action: "net:connect:tcp", Context: "global", Governance: map[string]any{"active": false},
		ResourceType: "net:domain", ResourceValue: target, Target: target, Type: "network"}
	if err := a.Store.View(func(st *fakestate.State) error {
		var sb *fakestate.Sandbox
		if *sandbox != "" {
			if sb, err = a.lookup(st, *sandbox); err != nil {
				return err
			}
			res.Context = "sandbox:" + sb.Name
		}
		rules := rulesFor(st, sb, false)
		for _, r := range rules {
			if r.Decision == "deny" && r.ResourceType() == "network" && slices.ContainsFunc(r.Resources, func(p string) bool { return matches(p, target) }) {
				res.DenyKind, res.Origin, res.Reason, res.Rule = "explicit", "local", "Denied by local rule", "local:"+r.ID
				return nil
			}
		}
		for _, r := range rules {
			if r.Decision == "allow" && r.ResourceType() == "network" && slices.ContainsFunc(r.Resources, func(p string) bool { return matches(p, target) }) {
				res.Allowed = true
				return nil
			}
		}
		res.DenyKind, res.Reason = "implicit", "No matching allow rule (default deny)"
		return nil
	}); err != nil {
		return err
	}
	if *jsonFlag {
		if err := a.JSON(res); err != nil {
			return err
		}
	} else if res.Allowed {
		fmt.Fprintf(a.Stdout, "Allowed: %s\n", args[0])
	} else {
		fmt.Fprintf(a.Stdout, "Denied: %s\n", args[0])
	}
	if !res.Allowed {
		return &fakecli.Exit{Code: 1}
	}
	return nil
}

// policyLs is `sbx policy ls [SANDBOX]` with the filters of the v0.47.0
// help. For a sandbox that does not exist, v0.47.0 "answers with the
// global rules instead" (evidence §1.2); earlier versions are assumed to
// say not found (UNCONFIRMED). The table layouts are UNCONFIRMED beyond
// their column names (docker-sandboxes-cli.md §2.8: one overview row per
// policy; --wide one row per rule with POLICY, POLICY_ID, RULE, RULE_ID).
func (a *app) policyLs(args []string) error {
	fs := fakecli.Flags("policy ls")
	jsonFlag := new(bool)
	if a.Version.AtLeast(vJSON) {
		fs.BoolVar(jsonFlag, "json", false, "Output in JSON format")
	}
	wide := fs.Bool("wide", false, "Show detailed rule-level output with rule IDs and resources")
	decision := fs.String("decision", "", "allow|deny")
	typ := fs.String("type", "all", "all|network|filesystem")
	source := fs.String("source", "", "local|org|kit")
	createdVia := fs.String("created-via", "", "default|added|provisioned|approval")
	fs.Bool("include-inactive", false, "Include inactive rules")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 1); err != nil {
		return err
	}
	var rules []scopedRule
	if err := a.Store.View(func(st *fakestate.State) error {
		if len(args) == 0 {
			rules = rulesFor(st, nil, true)
			return nil
		}
		sb := st.Find(args[0])
		if sb == nil && !a.Version.AtLeast(vCaptured) {
			return a.notFound(args[0])
		}
		rules = rulesFor(st, sb, false)
		return nil
	}); err != nil {
		return err
	}
	out := []ruleJSON{}
	for _, r := range rules {
		j := a.ruleJSON(r)
		kit := r.Via == "provisioned"
		switch {
		case *decision != "" && j.Decision != *decision,
			*typ == "network" && j.ResourceType != "network" && j.ResourceType != "http",
			*typ == "filesystem" && !strings.HasPrefix(j.ResourceType, "filesystem"),
			*createdVia != "" && r.Via != *createdVia,
			*source == "org", *source == "kit" && !kit, *source == "local" && kit:
			continue
		}
		out = append(out, j)
	}
	if *jsonFlag {
		return a.JSON(map[string]any{"rules": out})
	}
	if len(out) == 0 {
		fmt.Fprintln(a.Stdout, "No policies match the selected filters.") // v0.47.0 capture
		return nil
	}
	if *wide {
		rows := [][]string{{"POLICY", "POLICY_ID", "RULE", "RULE_ID", "TYPE", "DECISION", "APPLIES TO"}}
		for _, r := range out {
			rows = append(rows, []string{policyName(r), r.PolicyID, strings.Join(r.Resources, ","), r.ID, r.ResourceType, r.Decision, r.AppliesTo})
		}
		return fakecli.Table(a.Stdout, rows)
	}
	// One row per policy: "network: 194 allow" (evidence, v0.47.0 capture).
	type key struct{ policy, source, applies string }
	var order []key
	counts := map[key]map[string]int{}
	for _, r := range out {
		source := "local"
		if r.Provenance != nil && r.Provenance.CreatedVia == "provisioned" {
			source = "kit"
		}
		k := key{policyName(r), source, r.AppliesTo}
		if counts[k] == nil {
			order = append(order, k)
			counts[k] = map[string]int{}
		}
		counts[k][strings.SplitN(r.ResourceType, ":", 2)[0]+" "+r.Decision] += len(r.Resources)
	}
	rows := [][]string{{"POLICY", "SOURCE", "APPLIES TO", "SUMMARY"}}
	for _, k := range order {
		var parts []string
		for _, c := range []string{"network allow", "network deny", "filesystem allow", "filesystem deny"} {
			if n := counts[k][c]; n > 0 {
				t, d, _ := strings.Cut(c, " ")
				parts = append(parts, fmt.Sprintf("%s: %d %s", t, n, d))
			}
		}
		rows = append(rows, []string{k.policy, k.source, k.applies, strings.Join(parts, ", ")})
	}
	return fakecli.Table(a.Stdout, rows)
}

func policyName(r ruleJSON) string {
	if r.Scope == "global" {
		return "local-policy"
	}
	return "local"
}

// logJSON is one entry of `sbx policy log --json` (evidence §1.6,
// [3P-measured v0.47.0, v0.38.0]): counted per host, not listed per
// request.
type logJSON struct {
	Host       string `json:"host"`
	VMName     string `json:"vm_name"`
	ProxyType  string `json:"proxy_type"`
	Rule       string `json:"rule"`
	Since      string `json:"since"`
	LastSeen   string `json:"last_seen"`
	CountSince int    `json:"count_since"`
	Reason     string `json:"reason,omitempty"`
}

// policyLog is `sbx policy log [SANDBOX]`: JSON {"blocked_hosts": [...],
// "allowed_hosts": [...]} (evidence §1.6), or the two tables of
// docker-sandboxes-cli.md §2.9 (LAST SEEN as "10:15:25 29-Jan").
func (a *app) policyLog(args []string) error {
	fs := fakecli.Flags("policy log")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	limit := fs.Int("limit", 0, "Maximum number of log entries to show")
	quiet := fs.BoolP("quiet", "q", false, "Only display log entries")
	fs.String("type", "all", "all|network|filesystem")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 1); err != nil {
		return err
	}
	var entries []fakestate.LogEntry
	if err := a.Store.View(func(st *fakestate.State) error {
		if len(args) == 1 {
			if _, err := a.lookup(st, args[0]); err != nil {
				return err
			}
		}
		for _, e := range st.Log {
			if (len(args) == 0 || e.Sandbox == args[0]) && e.Host != "" {
				entries = append(entries, e)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if *limit > 0 && len(entries) > *limit {
		entries = entries[len(entries)-*limit:]
	}
	if *jsonFlag {
		doc := map[string][]logJSON{"blocked_hosts": {}, "allowed_hosts": {}}
		for _, e := range entries {
			j := logJSON{Host: e.Host, VMName: e.Sandbox, ProxyType: e.Proxy, Rule: e.Rule, Since: e.Time.Format(time.RFC3339),
				LastSeen: e.Time.Format(time.RFC3339), CountSince: e.Count, Reason: e.Reason}
			doc[e.Action+"_hosts"] = append(doc[e.Action+"_hosts"], j)
		}
		return a.JSON(doc)
	}
	head := []string{"SANDBOX", "TYPE", "HOST", "PROXY", "RULE", "REASON", "LAST SEEN", "COUNT"}
	for i, section := range []struct{ title, action string }{{"Blocked requests:", "blocked"}, {"Allowed requests:", "allowed"}} {
		rows := [][]string{}
		if !*quiet {
			if i > 0 {
				fmt.Fprintln(a.Stdout)
			}
			fmt.Fprintln(a.Stdout, section.title)
			rows = append(rows, head)
		}
		for _, e := range entries {
			if e.Action == section.action {
				rows = append(rows, []string{e.Sandbox, e.Type, e.Host, e.Proxy, e.Rule, e.Reason,
					e.Time.Format("15:04:05 02-Jan"), fmt.Sprint(e.Count)})
			}
		}
		if err := fakecli.Table(a.Stdout, rows); err != nil {
			return err
		}
	}
	return nil
}

// policyInit is `sbx policy init PRESET` (0.34.0): "a one-time setup: once
// initialized, use sbx policy reset to start over".
func (a *app) policyInit(args []string) error {
	fs := fakecli.Flags("policy init")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	if !slices.Contains([]string{"allow-all", "balanced", "deny-all"}, args[0]) {
		return errf("invalid preset %q: must be allow-all, balanced or deny-all", args[0])
	}
	return a.Store.Update(func(st *fakestate.State) error {
		if st.Policy.Initialized {
			return errf("the global network policy is already initialized; use \"sbx policy reset\" to start over")
		}
		st.Policy = fakestate.Policy{Initialized: true, Preset: args[0], Rules: presetRules(args[0])}
		return nil
	})
}

// policyReset "deletes the local policy store and stops the daemon"
// (docker-sandboxes-cli.md §1.3), so every sandbox stops.
func (a *app) policyReset(args []string) error {
	fs := fakecli.Flags("policy reset")
	force := fs.BoolP("force", "f", false, "Skip confirmation")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	return a.Store.Update(func(st *fakestate.State) error {
		ok, err := a.confirm(*force, "Delete the local policy store and stop the daemon?", "sbx policy reset --force")
		if err != nil {
			return err
		}
		if !ok {
			return errf("cancelled")
		}
		st.Policy = fakestate.Policy{Rules: []fakestate.Rule{}}
		for _, sb := range st.Sandboxes {
			sb.Network.Rules = []fakestate.Rule{}
			sb.Status, sb.Detached = "stopped", false
		}
		return nil
	})
}
