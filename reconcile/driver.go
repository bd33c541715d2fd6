// Package reconcile turns a resolved sandbox.yaml into ordered actions on a
// backend: it observes the live sandbox once, decides once in a pure planner
// (desired, live, last-applied record and the driver's capabilities in, a
// Plan out), renders the plan for people and machines, and applies it step by
// step without making any further decision.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sbxhq/sbx/spec"
)

// Driver is what reconcile needs from a backend. Drivers satisfy it
// implicitly; each asserts it once.
type Driver interface {
	// Name is the driver's name as sandbox.yaml spells it ("sbx",
	// "docker-sandbox", "docker").
	Name() string
	// Caps says, per field, whether the backend changes it in place, must
	// replace the sandbox, or cannot do it at all, and what it can read back.
	Caps() Caps
	// Observe reads the named sandboxes with one listing call plus at most one
	// policy read per existing sandbox. A name missing from the result, or
	// present with Exists false, does not exist.
	Observe(ctx context.Context, names []string) (map[string]*Live, error)
	// Calls turns one planned step into the backend calls that carry it
	// out, decided from the step, the desired sandbox (nil in a destroy
	// plan) and what Observe read (nil for a sandbox that did not exist,
	// and for the steps after a create: a remove and the create after it
	// get what was observed, so that a replacement can keep parts of the
	// old):
	// everything a driver decides, it decides here, before anything runs,
	// so the plan shows every call apply will make. Calls is never asked
	// for StepRecord or StepForget: Apply hands those to its Recorder.
	Calls(s Step, sb *spec.Spec, live *Live) ([]Call, error)
}

// Call is one backend call of a step, as the plan shows it and as apply
// runs it.
type Call struct {
	// Desc is the call as people read it (a command line, an Engine API
	// request), shortened where it would be kilobytes.
	Desc string
	// Run makes the call. It decides nothing the plan did not show.
	Run func(ctx context.Context) error
}

// Secrets maps a secret's name to its value. Values never enter a plan, a
// record or an error message.
type Secrets map[string]string

// Live is what a backend reads back about one sandbox. Which fields mean
// anything is given by the driver's Caps (Cap.Readable); the planner ignores
// the others.
type Live struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	// Managed is true when the backend itself carries sbx's identity marker
	// (the docker driver's labels). Backends without labels leave it false;
	// there the record in the state directory is the marker.
	Managed bool   `json:"managed,omitempty"`
	Status  string `json:"status,omitempty"`
	// Stopped is true when the backend reports the sandbox exists and is
	// not running (Status says how: "exited", "stopped"); the planner
	// starts it where the table says FieldStatus is InPlace.
	Stopped bool `json:"stopped,omitempty"`
	// User is who the sandbox's processes run as, where the backend keeps
	// it ("" the image's own).
	User     string `json:"user,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Template string `json:"template,omitempty"`
	// Checkpoint is the checkpoint the sandbox was made from, where the
	// backend keeps that with the sandbox (the docker driver's label);
	// Template is then "".
	Checkpoint string         `json:"checkpoint,omitempty"`
	Workspace  spec.Workspace `json:"workspace"`
	Mounts     []spec.Mount   `json:"mounts,omitempty"`
	Ports      []spec.Port    `json:"ports,omitempty"`
	Network    LiveNetwork    `json:"network"`
	Resources  spec.Resources `json:"resources"`
	Runtime    string         `json:"runtime,omitempty"`
	// DefaultRuntime is the runtime the backend gives a sandbox whose
	// file names none (the docker daemon's DefaultRuntime), which Runtime
	// reports as "": a file that names it explicitly (docker: {runtime:
	// runc}) asks for what runs (liveRuntime).
	DefaultRuntime string `json:"-"`
	// NoNewPrivileges, Protect and Hardening are the docker driver's
	// safeguards as the sandbox was created: no-new-privileges, the
	// declaration mounted read-only, and the version of its defaults
	// (limits, dropped capabilities, log rotation).
	NoNewPrivileges bool   `json:"noNewPrivileges,omitempty"`
	Protect         bool   `json:"protect,omitempty"`
	Hardening       string `json:"hardening,omitempty"`
	// Kubernetes is what the kubernetes driver reads back of its options
	// (FieldKubernetes, FieldEgressMode, FieldWarmPool), defaults filled in.
	Kubernetes spec.Kubernetes `json:"kubernetes,omitzero"`
	// Unreported lists readable fields this observation did not report (the
	// plugin lists no workspaces for a stopped VM): the planner compares
	// them with the record, as if the backend could not read them back.
	Unreported []Field `json:"unreported,omitempty"`
	// Record is the last-applied record when the backend stores it with the
	// sandbox (docker labels); nil otherwise.
	Record *Record `json:"record,omitempty"`
	// Missing names parts of the sandbox the backend found gone (the
	// docker driver's "egress" container); the plan recreates them.
	Missing []string `json:"missing,omitempty"`
	// Detail is what the driver observed for its own Calls (rule ids,
	// port bindings, the state of a proxy); the planner never reads it.
	Detail any `json:"-"`
	// Notes are caveats from the backend the plan repeats, such as what
	// Docker's global policy allows beyond sandbox.yaml. A sandbox that does
	// not exist (Exists false) may carry them too, about the one a create
	// would make.
	Notes []string `json:"notes,omitempty"`
	// DockerNetworks are the user-defined Docker networks the sandbox's
	// egress proxy is on (docker.networks), sorted.
	DockerNetworks []string `json:"dockerNetworks,omitempty"`
	// Problems are what the backend found that the file asks and cannot
	// be had (a docker.networks network that does not exist): the plan
	// fails with them, as with Check's. A sandbox that does not exist may
	// carry them too.
	Problems []Problem `json:"problems,omitempty"`
}

// LiveNetwork is a sandbox's network policy as the backend reports it.
type LiveNetwork struct {
	Policy     string   `json:"policy,omitempty"`
	Allow      []string `json:"allow,omitempty"`
	Deny       []string `json:"deny,omitempty"`
	BlockCIDRs []string `json:"blockCIDRs,omitempty"`
	// HostPorts are the ports of network.hostPorts the backend reaches,
	// in decimal.
	HostPorts []string `json:"hostPorts,omitempty"`
}

// ErrNameInUse is what a driver's create step wraps when the backend
// already holds an object by the sandbox's name that the create could not
// replace: the fix is that object (remove, rename or adopt it), not
// sandbox.yaml.
var ErrNameInUse = errors.New("name in use")

// StepKind enumerates what a step does.
type StepKind int

// The step kinds, in the order a replace or an update runs them.
const (
	StepBuild           StepKind = iota + 1 // build the template image
	StepStop                                // stop the sandbox
	StepRemove                              // remove the sandbox
	StepCreate                              // create the sandbox with every create-time field
	StepSetEnv                              // change env in place (docker-sandbox: applied per exec)
	StepUpdateResources                     // change cpu/memory limits in place
	StepSetPorts                            // publish/unpublish ports (Step.Ports)
	StepSetNetwork                          // change network rules (Step.Network)
	StepSetSecrets                          // set/unset secrets (Step.Secrets)
	StepVerify                              // check the sandbox runs
	StepRecord                              // write the last-applied record (Step.Record)
	StepForget                              // delete the last-applied record
	StepRepair                              // recreate missing parts (Step.Parts)
	StepStart                               // start a stopped sandbox
	StepSetWarmPool                         // make, resize or remove the sandbox's warm pool
	StepJoinNetworks                        // put the egress proxy on the networks of docker.networks
)

var stepNames = map[StepKind]string{
	StepBuild: "build", StepStop: "stop", StepRemove: "remove", StepCreate: "create",
	StepSetEnv: "set-env", StepUpdateResources: "update-resources", StepSetPorts: "set-ports",
	StepSetNetwork: "set-network", StepSetSecrets: "set-secrets", StepVerify: "verify",
	StepRecord: "record", StepForget: "forget", StepRepair: "repair", StepStart: "start",
	StepSetWarmPool: "set-warm-pool", StepJoinNetworks: "join-networks",
}

func (k StepKind) String() string {
	if n, ok := stepNames[k]; ok {
		return n
	}
	return fmt.Sprintf("StepKind(%d)", int(k))
}

// Key is the part of sandbox.yaml a failure of this step most likely
// comes from, for the message that says what to fix; "" when a failure
// is the backend's rather than the file's.
func (k StepKind) Key() string {
	switch k {
	case StepBuild:
		return "template.build"
	case StepCreate:
		return "template"
	case StepUpdateResources:
		return "resources"
	case StepSetPorts:
		return "ports"
	case StepSetNetwork:
		return "network"
	case StepJoinNetworks:
		return "docker.networks"
	case StepSetEnv:
		return "env"
	}
	return ""
}

// MarshalText writes the kind's name, so saved plans read well.
func (k StepKind) MarshalText() ([]byte, error) {
	if _, ok := stepNames[k]; !ok {
		return nil, fmt.Errorf("unknown step kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a kind's name.
func (k *StepKind) UnmarshalText(b []byte) error {
	for kind, n := range stepNames {
		if n == string(b) {
			*k = kind
			return nil
		}
	}
	return fmt.Errorf("unknown step kind %q", b)
}

// Step is one action of a plan. Its payload says exactly what to do, so the
// driver executes it without comparing anything itself.
type Step struct {
	Kind    StepKind `json:"kind"`
	Sandbox string   `json:"sandbox"`
	// Reason is the change that caused the step, as users read it.
	Reason  string        `json:"reason"`
	Env     *NameDelta    `json:"env,omitempty"`     // StepSetEnv
	Secrets *NameDelta    `json:"secrets,omitempty"` // StepSetSecrets
	Ports   *PortDelta    `json:"ports,omitempty"`   // StepSetPorts
	Network *NetworkDelta `json:"network,omitempty"` // StepSetNetwork
	Record  *Record       `json:"record,omitempty"`  // StepCreate (for backends keeping it in labels) and StepRecord
	Parts   []string      `json:"parts,omitempty"`   // StepRepair
	// Calls are the backend calls the step makes (Call.Desc), filled in
	// by Prepare.
	Calls []string `json:"calls,omitempty"`
}

// String names the step the way apply's messages do: `create sandbox "api"`.
func (s Step) String() string {
	q := fmt.Sprintf("%q", s.Sandbox)
	switch s.Kind {
	case StepBuild:
		return "build template of sandbox " + q
	case StepStop, StepRemove, StepCreate, StepVerify, StepForget:
		return s.Kind.String() + " sandbox " + q
	case StepSetEnv:
		return "set env of sandbox " + q
	case StepUpdateResources:
		return "update resources of sandbox " + q
	case StepSetPorts:
		return "update ports of sandbox " + q
	case StepSetNetwork:
		return "update network rules of sandbox " + q
	case StepSetSecrets:
		return "set secrets of sandbox " + q
	case StepRecord:
		return "record sandbox " + q
	case StepRepair:
		return "recreate the " + strings.Join(s.Parts, ", ") + " of sandbox " + q
	case StepSetWarmPool:
		return "set the warm pool of sandbox " + q
	case StepJoinNetworks:
		return "put the egress proxy of sandbox " + q + " on its Docker networks"
	}
	return s.Kind.String() + " sandbox " + q
}

// NameDelta lists names to set (their values come from the spec or from
// Secrets) and names to unset.
type NameDelta struct {
	Set   []string `json:"set,omitempty"`
	Unset []string `json:"unset,omitempty"`
}

// PortDelta lists ports to publish and to unpublish.
type PortDelta struct {
	Publish   []spec.Port `json:"publish,omitempty"`
	Unpublish []spec.Port `json:"unpublish,omitempty"`
}

// NetworkDelta is a change of network rules. On a new sandbox every rule is
// an addition and Policy is always set.
type NetworkDelta struct {
	Policy           string   `json:"policy,omitempty"` // new default policy; "" keeps it
	AllowAdd         []string `json:"allowAdd,omitempty"`
	AllowRemove      []string `json:"allowRemove,omitempty"`
	DenyAdd          []string `json:"denyAdd,omitempty"`
	DenyRemove       []string `json:"denyRemove,omitempty"`
	BlockCIDRsAdd    []string `json:"blockCIDRsAdd,omitempty"`
	BlockCIDRsRemove []string `json:"blockCIDRsRemove,omitempty"`
	HostPortsAdd     []string `json:"hostPortsAdd,omitempty"`
	HostPortsRemove  []string `json:"hostPortsRemove,omitempty"`
}

// Field is a part of a sandbox whose change a backend handles one way.
type Field int

// The fields Caps describes.
const (
	FieldAgent Field = iota + 1
	FieldTemplate
	FieldWorkspace
	FieldMounts
	FieldEnv
	FieldSecrets
	FieldResources
	FieldPorts
	FieldNetworkAdd    // an added allow/deny rule or blocked range, or a policy change
	FieldNetworkRemove // a removed allow/deny rule or blocked range
	FieldRuntime       // docker.runtime
	// FieldResourcesUnset is a cpu limit removed: some backends can lower
	// or raise a limit in place but not remove it.
	FieldResourcesUnset
	FieldNoNewPrivileges // docker.noNewPrivileges
	FieldProtect         // workspace.protect
	// FieldHardening is the version of the driver's safeguards a sandbox
	// was created with (Caps.Hardening).
	FieldHardening
	FieldTemplateBuild // template.build: context content, network
	FieldPids          // resources.pids
	// FieldStatus is whether the sandbox runs: declared running, found
	// stopped (Live.Stopped). InPlace: apply starts it (StepStart);
	// Ignored: the backend stops and starts sandboxes itself.
	FieldStatus
	FieldUser // user
	// FieldKubernetes is the kubernetes driver's pod and volume options
	// (kubernetes.runtimeClassName, workspaceSize, storageClass).
	FieldKubernetes
	// FieldEgressMode is kubernetes.egress: whether the sandbox's pinning
	// to its egress proxy must be shown enforced.
	FieldEgressMode
	// FieldWarmPool is kubernetes.warmPool.
	FieldWarmPool
	// FieldDockerNetworks is docker.networks: the Docker networks the
	// egress proxy joins.
	FieldDockerNetworks
	// FieldSecretHosts is secrets.NAME.hosts: a proxy that adds the value
	// to requests for those hosts, the sandbox holding a placeholder.
	FieldSecretHosts
	// FieldSecretFiles is secrets.NAME.file: a file of credentials the
	// sandbox gets with placeholders in place of them.
	FieldSecretFiles
	// FieldHostPorts is network.hostPorts: ports on the host's loopback
	// the proxy reaches for the agent. A change is made with the
	// network's (StepSetNetwork).
	FieldHostPorts
	// FieldServices is services: containers beside the sandbox.
	FieldServices
)

var fieldNames = map[Field]string{
	FieldAgent: "agent", FieldTemplate: "template", FieldWorkspace: "workspace",
	FieldMounts: "mounts", FieldEnv: "env", FieldSecrets: "secrets", FieldResources: "resources",
	FieldPorts: "ports", FieldNetworkAdd: "network-add", FieldNetworkRemove: "network-remove",
	FieldRuntime: "docker.runtime", FieldResourcesUnset: "resources-unset",
	FieldNoNewPrivileges: "docker.noNewPrivileges", FieldProtect: "workspace.protect",
	FieldHardening: "hardening", FieldTemplateBuild: "template.build", FieldPids: "resources.pids",
	FieldStatus: "status", FieldUser: "user", FieldKubernetes: "kubernetes", FieldEgressMode: "kubernetes.egress",
	FieldWarmPool: "kubernetes.warmPool", FieldDockerNetworks: "docker.networks", FieldSecretHosts: "secrets.hosts",
	FieldSecretFiles: "secrets.file", FieldHostPorts: "network.hostPorts", FieldServices: "services",
}

func (f Field) String() string {
	if n, ok := fieldNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Field(%d)", int(f))
}

// MarshalText writes the field's name.
func (f Field) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText reads a field's name.
func (f *Field) UnmarshalText(b []byte) error {
	for field, n := range fieldNames {
		if n == string(b) {
			*f = field
			return nil
		}
	}
	return fmt.Errorf("unknown field %q", b)
}

// Mode is how a backend applies a change of a field.
type Mode int

// The modes.
const (
	// Unsupported: the backend cannot do it; a plan that needs it is an error.
	Unsupported Mode = iota
	// InPlace: the live sandbox is changed without recreating it.
	InPlace
	// Replace: the sandbox is removed and created again (Terraform's ForceNew).
	Replace
	// Ignored: the field means nothing to this backend (docker.runtime
	// outside the docker driver); it never causes a change.
	Ignored
	// PerExec: the backend never stores the field; it is passed to each
	// exec (secrets). A change is recorded, and changes nothing live.
	PerExec
)

func (m Mode) String() string {
	return [...]string{"unsupported", "in place", "replace", "ignored", "per exec"}[m]
}

// Cap is one row of a driver's capability table.
type Cap struct {
	Mode Mode
	// Readable means Observe reports the field, so it is compared live and
	// changes made by hand show as drift; otherwise it is compared with the
	// last-applied record.
	Readable bool
	// Reason explains the mode in the plan: "the sbx backend cannot change
	// env in place".
	Reason string
}

// Caps is a driver's capability table, data the pure planner reads.
type Caps struct {
	Driver string
	Fields map[Field]Cap
	// Defaults are the limits the driver applies when the file sets none;
	// the planner compares the file's limits with these filled in.
	Defaults spec.Resources
	// Hardening names the version of the safeguards the driver applies at
	// create ("" when it has none to version); a sandbox created with an
	// older one is replaced to get them.
	Hardening string
	// Protects is set when the driver makes the declaration read-only
	// inside the sandbox (workspace.protect).
	Protects bool
	// ByRuntime overrides rows for sandboxes of one docker.runtime.
	ByRuntime map[string]map[Field]Cap
	// NetworkAtCreate is set when creating the sandbox puts its network
	// rules in force: no separate network step follows a create.
	NetworkAtCreate bool
	// Constraints are what the backend requires beyond the rows.
	Constraints Constraints
	// ReplaceLoses names what a replacement discards beyond what was
	// installed inside the sandbox ("its network log (sbx netlog)"); a
	// replace plan says so.
	ReplaceLoses string
	// StopKeeps says what sbx stop keeps and what it loses on this
	// backend, as the sentence after `Stopped sandbox "NAME"; ` (stops
	// differ: docker keeps the container's filesystem, kubernetes deletes
	// the pod and keeps only the workspace volume).
	StopKeeps string
}

// Of returns the row for f; a field the table omits is unsupported.
func (c Caps) Of(f Field) Cap {
	if r, ok := c.Fields[f]; ok {
		return r
	}
	return Cap{Mode: Unsupported, Reason: fmt.Sprintf("the %s backend does not support %s", c.Driver, f)}
}

// ReplaceCap is a row for a field the backend changes only by replacing
// the sandbox, with the reason plans give.
func ReplaceCap(driver, what string, readable bool) Cap {
	return Cap{Mode: Replace, Readable: readable, Reason: fmt.Sprintf("the %s backend cannot change %s in place", driver, what)}
}

// InPlaceCap is a row for a field the backend changes in place; how says
// how, for the plan.
func InPlaceCap(how string, readable bool) Cap {
	return Cap{Mode: InPlace, Readable: readable, Reason: how}
}

// PerExecCap is the row of secrets on every driver: their values reach a
// process only through the environment of the exec that starts it.
var PerExecCap = Cap{Mode: PerExec, Reason: "secrets are passed to each exec, never stored in the sandbox"}

// ProxySecretsCap is the row of secrets.NAME.hosts on drivers whose
// egress proxy adds a secret's value to requests for its hosts (how says
// which proxy): the value is handed to it before each exec, like the
// secret's own.
func ProxySecretsCap(how string) Cap {
	return Cap{Mode: PerExec, Reason: how}
}

// DockerOnlyCap is the row, on other drivers, of a field only the docker
// driver reads.
func DockerOnlyCap(what string) Cap {
	return Cap{Mode: Ignored, Reason: what + " applies only to the docker driver"}
}

// KubernetesOnlyCap is the row, on other drivers, of a field only the
// kubernetes driver reads.
func KubernetesOnlyCap(what string) Cap {
	return Cap{Mode: Ignored, Reason: what + " applies only to the kubernetes driver"}
}
