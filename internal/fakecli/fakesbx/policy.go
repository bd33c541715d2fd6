package fakesbx

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// balancedHosts is the fake's "balanced" preset: "Default deny, with common
// dev sites allowed" (docker-sandboxes-cli.md §2.10). The list itself is
// invented; the policy name "balanced-dev" is from §2.8.
var balancedHosts = []string{"api.anthropic.com", "api.openai.com", "github.com", "*.github.com",
	"registry.npmjs.org", "pypi.org", "files.pythonhosted.org", "proxy.golang.org"}

func initPolicy(st *fakestate.State, preset string) {
	st.Policy = fakestate.Policy{Initialized: true, Preset: preset, Default: "deny", Rules: []fakestate.Rule{}}
	switch preset {
	case "allow-all":
		st.Policy.Default = "allow"
	case "balanced":
		for _, h := range balancedHosts {
			addRule(&st.Policy.Rules, "local", fakestate.Rule{Policy: "balanced-dev", Decision: "allow", Resource: h})
		}
	}
}

// addRule appends r unless an identical rule exists; origin is "local"
// (global) or "sandbox:NAME".
func addRule(rules *[]fakestate.Rule, origin string, r fakestate.Rule) {
	r.ID = fakestate.RuleID(origin, r)
	for _, x := range *rules {
		if x.ID == r.ID {
			return
		}
	}
	*rules = append(*rules, r)
}

// scopeRules returns the rule list --sandbox selects and its origin.
func (a *app) scopeRules(st *fakestate.State, sandbox string) (*[]fakestate.Rule, string, error) {
	if sandbox == "" {
		return &st.Policy.Rules, "local", nil
	}
	sb, err := a.lookup(st, sandbox)
	if err != nil {
		return nil, "", err
	}
	return &sb.Network.Rules, "sandbox:" + sb.Name, nil
}

// policyAdd is `sbx policy allow|deny network [--sandbox S] RESOURCES`
// (docker-sandboxes-cli.md §1.3 policy, 0.32.0 syntax). Output UNCONFIRMED
// (none).
func (a *app) policyAdd(args []string) error {
	decision := a.path[1]
	fs := newFlags("policy " + decision + " network")
	sandbox := fs.String("sandbox", "", "Add the rule to policy \"local\" scoped to a single sandbox")
	protocol := ""
	if a.version.AtLeast("0.45.0") {
		fs.StringVar(&protocol, "protocol", "", "tcp|udp|tcp,udp")
	}
	method := fs.String("method", "", "HTTP method (HTTP rules)")
	path := fs.String("path", "", "HTTP path (HTTP rules)")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	resources := splitList(args[0])
	if len(resources) == 0 {
		return &cliError{msg: "no resources given", code: 1}
	}
	if protocol != "" && !slices.Contains([]string{"tcp", "udp", "tcp,udp"}, protocol) {
		return &cliError{msg: fmt.Sprintf("invalid --protocol %q: must be tcp, udp or tcp,udp", protocol), code: 1}
	}
	return a.store.Update(func(st *fakestate.State) error {
		rules, origin, err := a.scopeRules(st, *sandbox)
		if err != nil {
			return err
		}
		for _, r := range resources {
			addRule(rules, origin, fakestate.Rule{Policy: "local", Decision: decision, Resource: r,
				Protocol: protocol, Method: *method, Path: *path})
		}
		return nil
	})
}

// policyRm is `sbx policy rm network [--sandbox S] --id ID | --resource R`.
func (a *app) policyRm(args []string) error {
	fs := newFlags("policy rm network")
	sandbox := fs.String("sandbox", "", "Sandbox whose rules to remove")
	id := fs.String("id", "", "Remove by rule ID")
	resource := fs.String("resource", "", "Remove by resource value(s), comma-separated")
	method := fs.String("method", "", "HTTP method (HTTP rules)")
	path := fs.String("path", "", "HTTP path (HTTP rules)")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	if *id == "" && *resource == "" {
		return &cliError{msg: "one of --id or --resource is required", code: 1} // wording UNCONFIRMED
	}
	return a.store.Update(func(st *fakestate.State) error {
		rules, _, err := a.scopeRules(st, *sandbox)
		if err != nil {
			return err
		}
		res := splitList(*resource)
		n := len(*rules)
		*rules = slices.DeleteFunc(*rules, func(r fakestate.Rule) bool {
			if *id != "" {
				return r.ID == *id
			}
			return slices.Contains(res, r.Resource) && (*method == "" || r.Method == *method) && (*path == "" || r.Path == *path)
		})
		if len(*rules) == n {
			return &cliError{msg: "no matching rule found", code: 1} // wording UNCONFIRMED
		}
		return nil
	})
}

// matches reports whether pattern (exact, *.domain, host:port, "**") matches
// target (host or host:port).
func matches(pattern, target string) bool {
	if pattern == "**" {
		return true
	}
	th, tp, _ := strings.Cut(target, ":")
	ph, pp, hasPort := strings.Cut(pattern, ":")
	if hasPort && tp != "" && pp != tp {
		return false
	}
	if rest, ok := strings.CutPrefix(ph, "*."); ok {
		return strings.HasSuffix(th, "."+rest)
	}
	return th == ph
}

// decide applies deny-over-allow (docker-sandboxes-cli.md §3.5) and the
// preset default.
func decide(st *fakestate.State, sb *fakestate.Sandbox, target string) bool {
	var rules []fakestate.Rule
	rules = append(rules, st.Policy.Rules...)
	if sb != nil {
		rules = append(rules, sb.Network.Rules...)
	}
	allowed := st.Policy.Default == "allow"
	for _, r := range rules {
		if matches(r.Resource, target) {
			if r.Decision == "deny" {
				return false
			}
			allowed = true
		}
	}
	return allowed
}

// policyCheck is `sbx policy check network [--sandbox S] TARGET`; output
// docker-sandboxes-cli.md §1.3 (`Allowed: H` / `Denied: H`). A denied
// target exits 1 (UNCONFIRMED).
func (a *app) policyCheck(args []string) error {
	fs := newFlags("policy check network")
	sandbox := fs.String("sandbox", "", "Check for one sandbox")
	fs.String("protocol", "", "tcp|udp")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	var ok bool
	if err := a.store.View(func(st *fakestate.State) error {
		var sb *fakestate.Sandbox
		if *sandbox != "" {
			if sb, err = a.lookup(st, *sandbox); err != nil {
				return err
			}
		}
		ok = decide(st, sb, args[0])
		return nil
	}); err != nil {
		return err
	}
	if ok {
		fmt.Fprintf(a.stdout, "Allowed: %s\n", args[0])
		return nil
	}
	fmt.Fprintf(a.stdout, "Denied: %s\n", args[0])
	return &exitCode{code: 1}
}

// policyRule is one rule of `sbx policy ls --json`, whose schema is
// UNCONFIRMED (docker-sandboxes-cli.md §2.8, §9); invented here.
type policyRule struct {
	ID       string `json:"id"`
	Policy   string `json:"policy"`
	Type     string `json:"type"`
	Origin   string `json:"origin"`
	Decision string `json:"decision"`
	Resource string `json:"resource"`
	Protocol string `json:"protocol,omitempty"`
	Method   string `json:"method,omitempty"`
	Path     string `json:"path,omitempty"`
}

func (a *app) policyLs(args []string) error {
	fs := newFlags("policy ls")
	jsonFlag := new(bool)
	formatFlag := new(string)
	wide := new(bool)
	if a.version.AtLeast("0.42.0") { // issue #290: --json unknown before
		fs.BoolVar(jsonFlag, "json", false, "Output in JSON format")
		fs.StringVar(formatFlag, "format", "", "Output format: table, json or yaml")
	}
	if a.version.AtLeast("0.35.0") {
		fs.BoolVar(wide, "wide", false, "Show detailed rule-level output with rule IDs and resources")
	}
	decision := fs.String("decision", "", "allow|deny")
	typ := fs.String("type", "all", "all|network|filesystem")
	source := fs.String("source", "", "local|org|kit")
	fs.String("created-via", "", "default|added|provisioned|approval")
	fs.Bool("include-inactive", false, "Include inactive rules")
	protocol := fs.String("protocol", "", "tcp|udp")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 1); err != nil {
		return err
	}
	f, err := format(*jsonFlag, *formatFlag)
	if err != nil {
		return err
	}
	var rules []policyRule
	var def, preset string
	if err := a.store.View(func(st *fakestate.State) error {
		def, preset = st.Policy.Default, st.Policy.Preset
		add := func(origin string, rs []fakestate.Rule) {
			for _, r := range rs {
				if *decision != "" && r.Decision != *decision {
					continue
				}
				if *typ == "filesystem" || *source == "org" || *source == "kit" {
					continue
				}
				if *protocol != "" && r.Protocol != "" && !strings.Contains(r.Protocol, *protocol) {
					continue
				}
				rules = append(rules, policyRule{ID: r.ID, Policy: r.Policy, Type: "network", Origin: origin,
					Decision: r.Decision, Resource: r.Resource, Protocol: r.Protocol, Method: r.Method, Path: r.Path})
			}
		}
		add("local", st.Policy.Rules)
		for _, sb := range st.Sandboxes {
			if len(args) == 0 || sb.Name == args[0] {
				add("sandbox:"+sb.Name, sb.Network.Rules)
			}
		}
		if len(args) == 1 && st.Find(args[0]) == nil {
			return a.notFound(args[0])
		}
		return nil
	}); err != nil {
		return err
	}
	if rules == nil {
		rules = []policyRule{}
	}
	if f == "json" {
		return a.json(map[string]any{"default": def, "preset": preset, "rules": rules})
	}
	if *wide {
		// Column names from docker-sandboxes-cli.md §2.8 (0.35 --wide:
		// POLICY, POLICY_ID, RULE, RULE_ID); the rest of the layout is
		// UNCONFIRMED. RULE is the resource.
		rows := [][]string{{"POLICY", "POLICY_ID", "RULE", "RULE_ID", "TYPE", "ORIGIN", "DECISION"}}
		for _, r := range rules {
			rows = append(rows, []string{r.Policy, policyID(r.Policy, r.Origin), r.Resource, r.ID, r.Type, r.Origin, r.Decision})
		}
		return fakecli.Table(a.stdout, rows)
	}
	// Format: docker-sandboxes-cli.md §2.8: one row per policy, origin and
	// decision, resources comma-joined; the STATUS column only before 0.32.
	status := !a.version.AtLeast("0.32.0")
	head := []string{"NAME", "TYPE", "ORIGIN", "DECISION"}
	if status {
		head = append(head, "STATUS")
	}
	rows := [][]string{append(head, "RESOURCES")}
	type key struct{ policy, origin, decision string }
	var order []key
	groups := map[key][]string{}
	for _, r := range rules {
		k := key{r.Policy, r.Origin, r.Decision}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r.Resource)
	}
	for _, k := range order {
		row := []string{k.policy, "network", k.origin, k.decision}
		if status {
			row = append(row, "active")
		}
		rows = append(rows, append(row, strings.Join(groups[k], ",")))
	}
	return fakecli.Table(a.stdout, rows)
}

func policyID(policy, origin string) string {
	return strings.TrimPrefix(fakestate.RuleID(origin, fakestate.Rule{Policy: policy}), "rule-")
}

// logJSON is one entry of `sbx policy log --json` (schema UNCONFIRMED,
// docker-sandboxes-cli.md §9; fields named after the §2.9 columns).
type logJSON struct {
	Sandbox  string `json:"sandbox"`
	Type     string `json:"type"`
	Host     string `json:"host"`
	Proxy    string `json:"proxy"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason"`
	LastSeen string `json:"last_seen"`
	Count    int    `json:"count"`
	Action   string `json:"action"`
}

func (a *app) policyLog(args []string) error {
	fs := newFlags("policy log")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	limit := fs.Int("limit", 0, "Maximum number of log entries to show")
	quiet := fs.BoolP("quiet", "q", false, "Only display log entries")
	typ := fs.String("type", "all", "all|network")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 1); err != nil {
		return err
	}
	var entries []fakestate.LogEntry
	if err := a.store.View(func(st *fakestate.State) error {
		if len(args) == 1 {
			if _, err := a.lookup(st, args[0]); err != nil {
				return err
			}
		}
		for _, e := range st.Log {
			if (len(args) == 0 || e.Sandbox == args[0]) && (*typ == "all" || e.Type == *typ) && e.Host != "" {
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
		out := []logJSON{}
		for _, e := range entries {
			out = append(out, logJSON{Sandbox: e.Sandbox, Type: e.Type, Host: e.Host, Proxy: e.Proxy, Rule: e.Rule,
				Reason: e.Reason, LastSeen: e.Time.Format(time.RFC3339), Count: e.Count, Action: e.Action})
		}
		return a.json(map[string]any{"entries": out})
	}
	// Format: docker-sandboxes-cli.md §2.9: a blocked and an allowed
	// section, LAST SEEN as "10:15:25 29-Jan". Column padding differs from
	// the hand-aligned example.
	head := []string{"SANDBOX", "TYPE", "HOST", "PROXY", "RULE", "REASON", "LAST SEEN", "COUNT"}
	section := func(title, action string) error {
		rows := [][]string{}
		if !*quiet {
			rows = append(rows, head)
		}
		for _, e := range entries {
			if e.Action == action {
				rows = append(rows, []string{e.Sandbox, e.Type, e.Host, e.Proxy, e.Rule, e.Reason,
					e.Time.Format("15:04:05 02-Jan"), fmt.Sprint(e.Count)})
			}
		}
		if !*quiet {
			fmt.Fprintln(a.stdout, title)
		}
		return fakecli.Table(a.stdout, rows)
	}
	if err := section("Blocked requests:", "blocked"); err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintln(a.stdout)
	}
	return section("Allowed requests:", "allowed")
}

// policyInit is `sbx policy init PRESET` (0.34.0; `set-default` before, then
// a hidden alias). "once initialized, use sbx policy reset to start over".
func (a *app) policyInit(args []string) error {
	if a.path[1] == "init" && !a.version.AtLeast("0.34.0") {
		return &cliError{msg: "unknown command \"init\" for \"sbx policy\"\nRun 'sbx policy --help' for usage.", code: 1}
	}
	fs := newFlags("policy init")
	sandbox := fs.String("sandbox", "", "(cloud only)")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	if *sandbox != "" {
		return &cliError{msg: "--sandbox is only supported with --cloud", code: 1}
	}
	if !slices.Contains([]string{"allow-all", "balanced", "deny-all"}, args[0]) {
		return &cliError{msg: fmt.Sprintf("invalid preset %q: must be allow-all, balanced or deny-all", args[0]), code: 1}
	}
	return a.store.Update(func(st *fakestate.State) error {
		if st.Policy.Initialized {
			return &cliError{msg: "the global network policy is already initialized; use \"sbx policy reset\" to start over", code: 1}
		}
		initPolicy(st, args[0])
		return nil
	})
}

// policyReset "deletes the local policy store and stops the daemon"
// (docker-sandboxes-cli.md §1.3), so every sandbox stops.
func (a *app) policyReset(args []string) error {
	fs := newFlags("policy reset")
	force := fs.BoolP("force", "f", false, "Skip confirmation")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	return a.store.Update(func(st *fakestate.State) error {
		if err := a.confirm(*force, "Delete the local policy store and stop the daemon?", "sbx policy reset --force"); err != nil {
			return err
		}
		st.Policy = fakestate.Policy{Rules: []fakestate.Rule{}}
		for _, sb := range st.Sandboxes {
			sb.Network.Rules = []fakestate.Rule{}
			sb.Status = "stopped"
		}
		return nil
	})
}
