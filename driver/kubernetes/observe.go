package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/par"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// observed is what Observe read of a sandbox for its Calls.
type observed struct {
	place     place
	egressIP  string // the proxy pod's address, "" when it has none
	suspended bool
	// workspace is the sandbox's workspace volume as made: its mount
	// path, read-only-ness and claim (a replacement keeps the volume only
	// when the file still wants the same).
	workspace spec.Workspace
	size      string
	class     string
	pool      *poolState
	// pinned is the proxy address the pod is pinned to in its own
	// network namespace ("" when it is not: NetworkPolicy alone).
	pinned string
}

func detailOf(live *reconcile.Live) *observed {
	if live != nil {
		if o, ok := live.Detail.(*observed); ok {
			return o
		}
	}
	return nil
}

// listing is one namespace's objects labelled as sbx's, by sandbox.
type listing struct {
	sandboxes map[string]*sandboxObj
	proxies   map[string]*podObj // the proxy pod of each sandbox
	policies  map[string]map[string]bool
	pools     map[string]*poolState
	// poolProxies are the proxy pods of warm pools.
	poolProxies map[string]*podObj
}

type sandboxObj struct {
	meta   meta
	spec   sandboxSpec
	status sandboxStatus
	// record is the record annotation read, nil without one; recordErr
	// says why it did not read.
	record    *reconcile.Record
	recordErr error
}

type podObj struct {
	meta   meta
	status podStatus
	// policy is a proxy pod's policy annotation read; policyErr says why
	// it did not read.
	policy    egress.Policy
	policyErr error
}

// poolState is a sandbox's warm pool as listed.
type poolState struct {
	replicas, ready int
	template        string
}

// The listing's kinds. SandboxWarmPool is agent-sandbox's extension
// (--extensions on the controller); a cluster without it has no pools.
const (
	kindsCore  = "sandboxes.agents.x-k8s.io,pods,networkpolicies.networking.k8s.io"
	kindsPools = ",sandboxwarmpools.extensions.agents.x-k8s.io"
	// listSelector leaves out the sandboxes' own pods, which agent-sandbox
	// reports in each Sandbox's status.
	listSelector = driver.LabelManaged + "=true," + driver.LabelRole + " notin (" + roleAgent + "," + rolePoolAgent + ")"
)

// Observe lists, once per place the sandboxes live in, every object sbx
// labelled there (one kubectl call: one list request per kind), and
// builds each sandbox's Live from it. Nothing is asked per sandbox: the
// proxy's policy is the one sbx last put in force, kept on its pod.
func (d *Driver) Observe(ctx context.Context, names []string) (map[string]*reconcile.Live, error) {
	byPlace := map[place][]string{}
	var places []place
	for _, n := range names {
		p := d.where(n)
		if _, ok := byPlace[p]; !ok {
			places = append(places, p)
		}
		byPlace[p] = append(byPlace[p], n)
	}
	listings := make([]*listing, len(places))
	errs := make([]error, len(places))
	var wg sync.WaitGroup
	for i, p := range places {
		wg.Add(1)
		go func() {
			defer wg.Done()
			listings[i], errs[i] = d.list(ctx, p)
		}()
	}
	wg.Wait()
	type sandbox struct {
		name string
		p    place
		ls   *listing
	}
	var all []sandbox
	for i, p := range places {
		if errs[i] != nil {
			return nil, errs[i]
		}
		for _, n := range byPlace[p] {
			all = append(all, sandbox{n, p, listings[i]})
		}
	}
	// Each sandbox's Live only reads its place's listing.
	lives := make([]*reconcile.Live, len(all))
	liveErrs := make([]error, len(all))
	par.Each(len(all), func(i int) { lives[i], liveErrs[i] = d.liveOf(all[i].name, all[i].p, all[i].ls) })
	live := map[string]*reconcile.Live{}
	for i, sb := range all {
		if liveErrs[i] != nil {
			return nil, liveErrs[i]
		}
		if lives[i] != nil {
			live[sb.name] = lives[i]
		}
	}
	return live, nil
}

// list reads a place's objects.
func (d *Driver) list(ctx context.Context, p place) (*listing, error) {
	d.mu.Lock()
	kinds := kindsCore
	if !d.noPools[p] {
		kinds += kindsPools
	}
	d.mu.Unlock()
	// --chunk-size=0: one request per kind however many objects (kubectl
	// otherwise pages by 500, so 500 sandboxes' 1000 NetworkPolicies took
	// two).
	args := []string{"get", kinds, "-l", listSelector, "-o", "json", "--chunk-size=0"}
	cmd := d.kubectl(p, args...)
	// The listing is read as kubectl prints it (15 MB for 500 sandboxes),
	// not gathered first.
	pr, pw := io.Pipe()
	type result struct {
		ls  *listing
		err error
	}
	decoded := make(chan result, 1)
	go func() {
		ls, err := decodeListing(runner.Quote(cmd), pr)
		// Whatever the decoder left unread (after an error) is drained,
		// so that kubectl ends as it would have: when it fails, what it
		// says is the error, not a broken pipe.
		io.Copy(io.Discard, pr)
		decoded <- result{ls, err}
	}()
	err := d.opts.Runner.Run(ctx, runner.Cmd{Args: cmd, Stdout: pw, StreamStdout: true})
	pw.Close()
	res := <-decoded
	var re *runner.Error
	if err != nil && errors.As(err, &re) {
		switch {
		case strings.Contains(re.Stderr, `resource type "sandboxwarmpools`):
			d.mu.Lock()
			d.noPools[p] = true
			d.mu.Unlock()
			return d.list(ctx, p)
		case strings.Contains(re.Stderr, `resource type "sandboxes`):
			return nil, fmt.Errorf("the cluster (%s) has no agent-sandbox Sandbox resource (sandboxes.agents.x-k8s.io, v1beta1): install agent-sandbox v1.0 or later", p)
		}
	}
	if err != nil {
		return nil, err
	}
	return res.ls, res.err
}

// listed is `kubectl get -o json`'s List as decodeListing reads it.
type listed struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Items      listedItems `json:"items"`
}

// listedItems hands each item to each as soon as it is decoded, so that
// the items are read while the rest of the listing is decoded.
type listedItems struct{ each func(listedItem) }

func (li *listedItems) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case 'n':
		return nil // no items
	case '[':
	default:
		return fmt.Errorf("items is a JSON %s, not an array", tok.Kind())
	}
	for dec.PeekKind() != ']' {
		var it listedItem
		if err := jsonv2.UnmarshalDecode(dec, &it); err != nil {
			return err
		}
		li.each(it)
	}
	_, err = dec.ReadToken()
	return err
}

// listedItem is one object of the listing, its spec and status kept raw
// until its kind says how to read them.
type listedItem struct {
	APIVersion string
	Kind       string
	Metadata   meta
	Spec       jsontext.Value
	Status     jsontext.Value
}

// UnmarshalJSONFrom reads an item as a struct with the fields above
// would be read, except that a spec or status that its kind, when named
// before it (kubectl prints names in order: apiVersion, kind, metadata,
// spec, status), is never read for (a pod's spec, a NetworkPolicy's) is
// skipped rather than copied: a third of the listing.
func (it *listedItem) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if tok, err := dec.ReadToken(); err != nil {
		return err
	} else if tok.Kind() != '{' {
		return fmt.Errorf("an item is a JSON %s, not an object", tok.Kind())
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch field := name.String(); field {
		case "apiVersion":
			err = jsonv2.UnmarshalDecode(dec, &it.APIVersion)
		case "kind":
			err = jsonv2.UnmarshalDecode(dec, &it.Kind)
		case "metadata":
			err = jsonv2.UnmarshalDecode(dec, &it.Metadata)
		case "spec", "status":
			if it.Kind != "" && !readsOf(it.Kind, field) {
				err = dec.SkipValue()
				break
			}
			var v jsontext.Value
			if v, err = dec.ReadValue(); err == nil {
				v = v.Clone() // the decoder reuses its buffer
				if field == "spec" {
					it.Spec = v
				} else {
					it.Status = v
				}
			}
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// readsOf says whether the driver reads field (spec or status) of an
// object of kind; of a kind it does not list it reads both, and refuses
// the kind.
func readsOf(kind, field string) bool {
	switch kind {
	case "Pod":
		return field == "status"
	case "NetworkPolicy":
		return false
	}
	return true
}

// decodeListing reads `kubectl get KINDS -o json` as kubectl prints it:
// a List (apiVersion v1) whose items are the kinds asked for. Any other
// shape, an unknown kind, or a field the driver relies on with another
// type or value is an error naming the command and the object, never a
// guess.
//
// It decodes with go-json-experiment/json (the encoding/json/v2 to be):
// kubectl prints 500 sandboxes' objects as 15 MB of indented JSON, which
// encoding/json read in 140 ms and this in 14 ms (BENCHMARKS.md). Its
// rules are stricter, not looser: names match exactly, a name twice in
// an object or invalid UTF-8 is an error.
func decodeListing(cmd string, r io.Reader) (*listing, error) {
	res := &listing{sandboxes: map[string]*sandboxObj{}, proxies: map[string]*podObj{}, policies: map[string]map[string]bool{},
		pools: map[string]*poolState{}, poolProxies: map[string]*podObj{}}
	items := make(chan listedItem, 64)
	var addErr error
	added := make(chan struct{})
	go func() {
		defer close(added)
		i := 0
		for it := range items {
			if addErr == nil {
				addErr = res.add(cmd, i, it)
			}
			i++
		}
	}()
	l := listed{Items: listedItems{each: func(it listedItem) { items <- it }}}
	err := jsonv2.UnmarshalRead(r, &l)
	close(items)
	<-added
	if err != nil {
		return nil, fmt.Errorf("%s: cannot parse its JSON: %v", cmd, err)
	}
	if l.APIVersion != "v1" || l.Kind != "List" {
		return nil, fmt.Errorf("%s: expected a v1 List, got %s %s", cmd, l.APIVersion, l.Kind)
	}
	if addErr != nil {
		return nil, addErr
	}
	return res, nil
}

// add reads item i of the listing into ls. What sbx wrote as JSON on a
// sandbox's objects (its record, its proxy's policy) is read here too,
// while the rest of the listing is decoded; liveOf reports what did not
// read.
func (res *listing) add(cmd string, i int, it listedItem) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: item %d (%s %s): %s", cmd, i, it.Kind, it.Metadata.Name, fmt.Sprintf(format, args...))
	}
	name := it.Metadata.Labels[driver.LabelSandbox]
	if it.Metadata.Name == "" || name == "" {
		return bad("no name or no %s label", driver.LabelSandbox)
	}
	role := it.Metadata.Labels[driver.LabelRole]
	switch {
	case it.Kind == "Sandbox" && it.APIVersion == apiSandbox:
		if role != roleSandbox {
			return nil // a warm pool's sandbox (agent-sandbox labels it itself)
		}
		s := &sandboxObj{meta: it.Metadata}
		if err := jsonv2.Unmarshal(it.Spec, &s.spec); err != nil {
			return bad("spec: %v", err)
		}
		if len(it.Status) > 0 {
			if err := jsonv2.Unmarshal(it.Status, &s.status); err != nil {
				return bad("status: %v", err)
			}
		}
		switch s.spec.OperatingMode {
		case "", "Running", "Suspended":
		default:
			return bad("spec.operatingMode: unknown value %q (known: Running, Suspended)", s.spec.OperatingMode)
		}
		for _, c := range s.status.Conditions {
			if c.Status != "True" && c.Status != "False" && c.Status != "Unknown" {
				return bad("status.conditions: %s has status %q", c.Type, c.Status)
			}
		}
		if rec := s.meta.Annotations[annRecord]; rec != "" {
			s.record = new(reconcile.Record)
			s.recordErr = json.Unmarshal([]byte(rec), s.record)
		}
		res.sandboxes[name] = s
	case it.Kind == "Pod" && it.APIVersion == "v1":
		p := &podObj{meta: it.Metadata}
		if len(it.Status) > 0 {
			if err := jsonv2.Unmarshal(it.Status, &p.status); err != nil {
				return bad("status: %v", err)
			}
		}
		switch role {
		case roleEgress:
			p.policyErr = json.Unmarshal([]byte(p.meta.Annotations[annPolicy]), &p.policy)
			res.proxies[name] = p
		case rolePoolProxy:
			res.poolProxies[name] = p
		}
	case it.Kind == "NetworkPolicy" && it.APIVersion == apiNetworking:
		if res.policies[name] == nil {
			res.policies[name] = map[string]bool{}
		}
		res.policies[name][it.Metadata.Name] = it.Metadata.DeletionTimestamp == ""
	case it.Kind == "SandboxWarmPool" && it.APIVersion == apiExtensions:
		var s struct {
			Replicas           *int `json:"replicas"`
			SandboxTemplateRef struct {
				Name string `json:"name"`
			} `json:"sandboxTemplateRef"`
		}
		var st struct {
			ReadyReplicas int `json:"readyReplicas"`
		}
		if err := jsonv2.Unmarshal(it.Spec, &s); err != nil || s.Replicas == nil {
			return bad("spec.replicas: missing or not an integer (%v)", err)
		}
		if len(it.Status) > 0 {
			if err := jsonv2.Unmarshal(it.Status, &st); err != nil {
				return bad("status: %v", err)
			}
		}
		res.pools[name] = &poolState{replicas: *s.Replicas, ready: st.ReadyReplicas, template: s.SandboxTemplateRef.Name}
	default:
		return bad("unexpected kind %s/%s in the listing", it.APIVersion, it.Kind)
	}
	return nil
}

// liveOf builds a sandbox's Live from its place's listing; nil when it
// does not exist and nothing needs saying about it. What sbx wrote on
// its objects (the record, the proxy's policy, the resources) and cannot
// read back is an error naming the object, never a sandbox read as
// having none of it.
func (d *Driver) liveOf(name string, p place, ls *listing) (*reconcile.Live, error) {
	sp := d.specOf(name)
	notes := notesFor(sp)
	sb := ls.sandboxes[name]
	if sb == nil {
		if len(notes) == 0 {
			return nil, nil
		}
		return &reconcile.Live{Name: name, Notes: append(notes, createNotes(sp)...)}, nil
	}
	l := &reconcile.Live{Name: name, Exists: true, Notes: notes}
	if sb.meta.Labels[driver.LabelManaged] != "true" || sb.meta.Name != name {
		return l, nil
	}
	l.Managed = true
	ann := sb.meta.Annotations
	if sb.record != nil {
		if err := sb.recordErr; err != nil {
			return nil, fmt.Errorf("sandbox %q: the annotation %s of sandboxes.agents.x-k8s.io/%s in namespace %s is not a record sbx wrote (%v); "+
				"it was changed by hand: remove it (kubectl annotate sandboxes.agents.x-k8s.io/%s %s-) and the record kept on this machine, if any, is used", name, annRecord, name, p.namespace, err, name, annRecord)
		}
		l.Record = sb.record
	}
	l.Agent = ann[annAgent]
	l.Hardening = ann[annHardening]
	o := &observed{place: p, suspended: sb.spec.OperatingMode == "Suspended"}
	ps := sb.spec.PodTemplate.Spec
	l.Kubernetes.RuntimeClassName = ps.RuntimeClassName
	for _, c := range ps.Containers {
		if c.Name != AgentContainer {
			continue
		}
		l.Template = c.Image
		if strings.Contains(c.Image, "/sbx-template-"+name+":") {
			l.Template = "" // built by sbx: the record's build hash tracks it
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "workspace" {
				l.Workspace = spec.Workspace{Path: m.MountPath, ReadOnly: m.ReadOnly}
			}
		}
		if c.Resources != nil {
			var err error
			if l.Resources.CPUs, err = parseCPU(c.Resources.Limits["cpu"]); err != nil {
				return nil, fmt.Errorf("sandbox %q: sandboxes.agents.x-k8s.io/%s in namespace %s: the agent container's resources.limits: %v", name, name, p.namespace, err)
			}
			if l.Resources.Memory, err = parseBytes(c.Resources.Limits["memory"]); err != nil {
				return nil, fmt.Errorf("sandbox %q: sandboxes.agents.x-k8s.io/%s in namespace %s: the agent container's resources.limits: memory %v", name, name, p.namespace, err)
			}
		}
		if sc := c.SecurityContext; sc != nil && sc.AllowPrivilegeEscalation != nil {
			l.NoNewPrivileges = !*sc.AllowPrivilegeEscalation
		}
	}
	o.workspace = l.Workspace
	o.pinned = pinnedTo(ps)
	l.Notes = append(l.Notes, mechanismNotes(sp, o.pinned)...)
	for _, ct := range sb.spec.VolumeClaimTemplates {
		if ct.Metadata.Name == "workspace" {
			l.Kubernetes.WorkspaceSize = ct.Spec.Resources.Requests["storage"]
			if ct.Spec.StorageClassName != nil {
				l.Kubernetes.StorageClass = *ct.Spec.StorageClassName
			}
		}
	}
	o.size, o.class = l.Kubernetes.WorkspaceSize, l.Kubernetes.StorageClass
	if pool := ls.pools[name]; pool != nil {
		l.Kubernetes.WarmPool = pool.replicas
		o.pool = pool
	}
	l.Status = statusOf(sb)
	l.Stopped = o.suspended
	proxy := ls.proxies[name]
	if proxy == nil || proxy.meta.DeletionTimestamp != "" {
		l.Missing = append(l.Missing, "egress proxy")
	} else {
		o.egressIP = proxy.status.PodIP
		pol := proxy.policy
		if err := proxy.policyErr; err != nil {
			return nil, fmt.Errorf("sandbox %q: the annotation %s of pod/%s in namespace %s is not the policy sbx put in force (%v); "+
				"it was changed by hand, so which policy the proxy enforces is unknown: delete the pod (kubectl delete pod/%s) and sbx apply makes it again with the file's", name, annPolicy, proxy.meta.Name, p.namespace, err, proxy.meta.Name)
		}
		l.Network = reconcile.LiveNetwork{Policy: pol.Default, Allow: pol.Allow, Deny: pol.Deny, BlockCIDRs: pol.BlockCIDRs}
	}
	pols := ls.policies[name]
	if !pols[sandboxPolicyName(name)] || !pols[egressPolicyName(name)] {
		l.Missing = append(l.Missing, "network policy")
	}
	l.Detail = o
	return l, nil
}

// notesFor are what every plan of the sandbox says: that its egress is
// only advisory, when the file accepts that.
func notesFor(sp *spec.Spec) []string {
	if sp == nil || sp.K8s().Egress != spec.EgressAdvisory {
		return nil
	}
	return []string{"EGRESS IS ADVISORY (kubernetes.egress: advisory): nothing checks that the cluster enforces the NetworkPolicy that pins this sandbox to its egress proxy; where it does not, the agent can bypass the proxy and its allow-list"}
}

// mechanismNotes say what pins an existing sandbox to its proxy.
func mechanismNotes(sp *spec.Spec, pinned string) []string {
	switch {
	case pinned != "":
		return []string{"egress is pinned to the proxy (" + pinned + ") in the pod's own network namespace (init container " + pinInit + " with NET_ADMIN wrote nftables rules before the agent started), besides the NetworkPolicy"}
	case sp != nil && sp.K8s().Egress == spec.EgressEnforced:
		return []string{"egress is pinned to the proxy by the NetworkPolicy alone (the namespace's Pod Security did not admit the pod's own pin when it was made); the probe shows the cluster enforces it"}
	}
	return nil
}

// createNotes say what a new sandbox's workspace is.
func createNotes(sp *spec.Spec) []string {
	if sp == nil {
		return nil
	}
	return []string{fmt.Sprintf("the workspace is a copy: %s is copied into the sandbox's volume when it is created; the agent's changes stay there until 'sbx pull' copies them back (sbx push copies the host's over)", sp.Workspace.Path)}
}

// statusOf is a Sandbox's status as sbx shows it: suspended (stopped),
// running (Ready) or not ready with the Ready condition's reason.
func statusOf(sb *sandboxObj) string {
	switch {
	case sb.spec.OperatingMode == "Suspended":
		return "suspended"
	case conditionTrue(sb.status.Conditions, "Ready"):
		return "running"
	}
	status := "not ready"
	if c := conditionOf(sb.status.Conditions, "Ready"); c != nil {
		status += ": " + c.Reason
	}
	return status
}

var _ driver.Lister = (*Driver)(nil)

// Managed lists the sandboxes sbx made in the driver's namespace (the
// one a file naming none gets), with their status and owner, for sbx ls:
// the namespace's one listing (Observe's), from which only the Sandbox's
// name, status and the owner in its record annotation are taken. A
// sandbox whose record does not read is listed with no owner. Sandboxes
// in other namespaces are found through the records on this machine.
func (d *Driver) Managed(ctx context.Context) ([]driver.Listed, error) {
	ls, err := d.list(ctx, d.where(""))
	if err != nil {
		return nil, err
	}
	var out []driver.Listed
	for name, sb := range ls.sandboxes {
		if sb.meta.Labels[driver.LabelManaged] != "true" || sb.meta.Name != name {
			continue
		}
		l := driver.Listed{Name: name, Status: statusOf(sb)}
		if sb.record != nil && sb.recordErr == nil {
			l.Owner = sb.record.Owner
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func conditionOf(cs []condition, typ string) *condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func conditionTrue(cs []condition, typ string) bool {
	c := conditionOf(cs, typ)
	return c != nil && c.Status == "True"
}

// parseCPU reads a CPU quantity ("1500m", "2", "0.5"; core/v1
// ResourceList, resource.Quantity).
func parseCPU(q string) (float64, error) {
	if q == "" {
		return 0, nil
	}
	if m, ok := strings.CutSuffix(q, "m"); ok {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu quantity %q", q)
		}
		return float64(n) / 1000, nil
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("cpu quantity %q", q)
	}
	return f, nil
}

// parseBytes reads a memory or storage quantity ("8589934592", "512Mi",
// "1G").
func parseBytes(q string) (int64, error) {
	if q == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}}
	mult := 1.0
	num := q
	for _, u := range units {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("quantity %q", q)
	}
	return int64(f*mult + 0.5), nil
}
