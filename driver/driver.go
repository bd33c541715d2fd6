// Package driver says what a backend is to the rest of sbx: the Backend
// every driver implements (reconcile's Driver plus identification), and,
// in one place, the optional abilities a driver may have (running commands
// in a sandbox, a network log, stopping and starting, …). Each driver
// asserts at compile time which of them it has:
//
//	var _ driver.Execer = (*Driver)(nil)
//
// The drivers themselves live in the packages below this one; the registry
// that names them is the session package's.
package driver

import (
	"context"
	"io"
	"time"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Env is what a driver is made with: the runner every backend command goes
// through (its environment is the only one backend commands see), and
// where sbx itself is.
type Env struct {
	Runner *runner.Runner
	// Self is this sbx's executable (the docker driver runs a static build
	// of it inside the containers; $SBX_STATIC_BINARY overrides).
	Self string
}

// Getenv reads the environment backend commands get.
func (e Env) Getenv(name string) string { return e.Runner.Getenv(name) }

// Identity is what a backend says about itself when probed: its version,
// and facts that differ between its releases and are cheaper to remember
// than to ask again (which flags the CLI has). sbx caches it per
// executable.
type Identity struct {
	Version string            `json:"version"`
	Facts   map[string]string `json:"facts,omitempty"`
}

// Backend is a driver as sbx uses it.
type Backend interface {
	reconcile.Driver
	// Identify probes the backend; it fails with a clear error when the
	// backend is absent, unusable or older than sbx supports.
	Identify(ctx context.Context) (Identity, error)
	// Use gives the driver an identity probed earlier (from the cache), so
	// its version-gated behaviour needs no second probe.
	Use(id Identity)
	// Executable is the backend's program; its path, size and time key
	// the identity cache.
	Executable() string
	// BuildHash is the content hash of the sandbox's template build, ""
	// when it has none; a change rebuilds the template.
	BuildHash(sp *spec.Spec) (string, error)
}

// Execer runs commands inside a sandbox.
type Execer interface {
	Exec(ctx context.Context, name string, argv []string, o ExecOptions) (int, error)
}

// EnvPerExec is a backend that stores no env: the sandbox's env goes with
// every exec.
type EnvPerExec interface{ EnvPerExec() bool }

// ProxySecret is a secret a sandbox's egress proxy adds to the requests
// for its hosts, in place of the placeholder the sandbox holds
// (spec.Secret.Hosts). Value is read on the host (from the environment,
// or by running Command, which the user approved).
type ProxySecret struct {
	Name, Placeholder, Value string
	Hosts                    []string
	Command                  []string // the approved host command, when the value comes from one
	// InFile is set for a credential of a file secret: the sandbox holds
	// the placeholder in that file (SecretFiles), not in a variable.
	InFile string
}

// SecretFiles is a backend that can put a file secret in the sandbox:
// the file with placeholders in place of its credentials, written by
// sbx's helper inside the sandbox as user ("" the sandbox's own), mode
// 0600, never read back.
type SecretFiles interface {
	WriteSecretFile(ctx context.Context, name, user, path string, data []byte) error
}

// SecretProxy is a backend whose egress proxy adds secrets to requests,
// so that the sandbox holds placeholders only.
type SecretProxy interface {
	// SetSecrets hands the sandbox's proxy its CA (certificate and key,
	// PEM) and its secrets, held in the proxy's memory only, replacing
	// those it had, and makes the CA's certificate one the sandbox's
	// commands trust. It returns the environment each exec gets for
	// them: the placeholders the sandbox holds (under the secrets' names,
	// unless the backend sets them itself) and what makes the commands
	// trust the CA (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, …). A value never
	// appears in it.
	SetSecrets(ctx context.Context, name string, caPEM []byte, secrets []ProxySecret) (map[string]string, error)
}

// ExecOptions configure running a command inside a sandbox.
type ExecOptions struct {
	Interactive, TTY bool
	Workdir          string
	// User runs the command as this user (-u), "" as the sandbox's own.
	User string
	// Env is passed as -e NAME with the value only in the environment of
	// the CLI process, never in argv: secrets, and on backends without
	// stored env, the sandbox's env.
	Env            map[string]string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// NetLogger reads a sandbox's network log.
type NetLogger interface {
	// NetLog calls emit with each entry, oldest first as the backend
	// orders them; with follow it goes on with new ones until ctx ends
	// (a backend that cannot follow says so instead).
	NetLog(ctx context.Context, name string, follow bool, emit func(netlog.Entry) error) error
}

// EgressCounter counts, in a time window, the requests a sandbox's egress
// denied and those that failed upstream (a name that did not resolve, a
// connection refused or timed out, a 5xx answer where the proxy sees it),
// and lists the first max of each, oldest first (for the loop's
// per-iteration records).
type EgressCounter interface {
	EgressCount(ctx context.Context, name string, since, until time.Time, max int) (netlog.Count, error)
}

// Helper is a backend that puts sbx's own static binary inside its
// sandboxes, at the returned path, so the loop can run the agent in a
// process group it kills whole.
type Helper interface{ SandboxHelper() string }

// Unprotecter is a backend whose protection of a sandbox's declaration
// (workspace.protect) can be lost without the backend noticing, as the
// docker driver's read-only binds are by a rename: Unprotected says how it
// was lost, one line per cause, nothing while it holds. The loop asks it
// before every iteration.
type Unprotecter interface {
	Unprotected(ctx context.Context, name string) ([]string, error)
}

// RuntimeChecker says whether gVisor is available (sbx doctor).
type RuntimeChecker interface {
	RuntimeCheck(ctx context.Context) (ok bool, detail string)
}

// TemplateChecker says whether a template image is already on the
// backend's machine (sbx doctor), where a missing one must be pulled.
type TemplateChecker interface {
	TemplatePresent(ctx context.Context, image string) (bool, error)
}

// Prober checks, with read-only commands, every backend format sbx parses
// and writes a redacted report (sbx doctor --probe).
type Prober interface {
	Probe(ctx context.Context, w io.Writer) error
}

// Lister lists the sandboxes the backend itself marks as sbx's (the docker
// driver's labels), for sbx ls, with one listing call: nothing else of a
// sandbox is read, so that listing others' sandboxes reads nothing of
// theirs. On backends without labels the records in the state directory
// are the only marker.
type Lister interface {
	Managed(ctx context.Context) ([]Listed, error)
}

// Listed is one sandbox a Lister lists: its name, the backend's word for
// its status, and whom its labels say it belongs to (zero for a sandbox
// created before sbx labelled owners).
type Listed struct {
	Name   string
	Status string
	Owner  reconcile.Owner
}

// Checkpointer keeps checkpoints of sandboxes on the backend (package
// checkpoint): a sandbox's filesystem, without its workspace or its
// secrets, saved as the image checkpoint.Ref(name), from which a sandbox
// whose template.checkpoint names it is created. sbx's record of each
// checkpoint is its catalog, not the backend's images.
type Checkpointer interface {
	// CheckpointCalls are the backend calls that save the sandbox, as
	// Observe saw it (live), as checkpoint cp, leaving it running if it
	// ran (or saying, in a call's Desc, that it stays stopped). output,
	// when set, is a private path where the backend also writes the
	// checkpoint's image archive as it saves it.
	CheckpointCalls(cp checkpoint.Checkpoint, live *reconcile.Live, output string) ([]reconcile.Call, error)
	// Checkpoints lists the checkpoints the backend holds, by name.
	Checkpoints(ctx context.Context) (map[string]checkpoint.Image, error)
	// RemoveCheckpoint removes a checkpoint's image; one already gone is
	// not an error.
	RemoveCheckpoint(ctx context.Context, name string) error
	// ExportCheckpoint writes a checkpoint's image archive (docker save's
	// layout) to w.
	ExportCheckpoint(ctx context.Context, name string, w io.Writer) error
	// ImportCheckpoint loads an archive checkpoint.Sanitize wrote, at a
	// private path, as checkpoint name.
	ImportCheckpoint(ctx context.Context, name, archive string) error
}

// Configurer is a backend whose sandboxes' place depends on their files
// (the kubernetes driver's context and namespace): the session gives it
// the resolved files before it observes anything.
type Configurer interface {
	Configure(specs []*spec.Spec) error
}

// Puller is a backend whose sandboxes work on a copy of the workspace (the
// kubernetes driver's volume): Pull copies the sandbox's copy back over
// the host workspace, Push the host workspace over the sandbox's. What
// Pull brings back was written by the agent: nothing may land outside the
// workspace, in the sandbox's own declaration or .git's config and hooks
// (while workspace.protect is on), or past size bounds. Neither deletes a
// file the other side lacks. Pull writes its report to w and returns
// what it copied and skipped (sbx loop says it in a line of its own).
type Puller interface {
	Pull(ctx context.Context, sp *spec.Spec, w io.Writer) (*tarball.Stats, error)
	Push(ctx context.Context, sp *spec.Spec, w io.Writer) error
}

// GitFetcher is a backend whose sandboxes commit to a git directory of
// their own (the docker driver's, driver/docker/git.go) rather than the
// host's .git: FetchGit brings those commits into the host's repository
// as refs/sbx/NAME/* with git's fetch, and says so on w.
type GitFetcher interface {
	FetchGit(ctx context.Context, sp *spec.Spec, w io.Writer) error
}

// Claimer keeps started sandboxes in a warm pool (kubernetes.warmPool):
// an ephemeral run claims one instead of creating a sandbox. Pooled says
// whether sp has a pool; Claim takes a sandbox from it, ready for Exec
// under sp's name, and returns the function that gives it up (pulling the
// workspace back first). Nothing is claimed when Claim fails.
type Claimer interface {
	Pooled(sp *spec.Spec) bool
	Claim(ctx context.Context, sp *spec.Spec, w io.Writer) (release func(context.Context) error, err error)
}

// Check is one line of a backend's own report in sbx doctor.
type Check struct {
	Name string
	OK   bool
	Info bool // neither ok nor a problem: what cannot be known yet
	// Warn marks a check that is not OK but does not stop the backend
	// from working (a kubectl outside its supported version skew).
	Warn   bool
	Detail string
}

// Doctor is a backend with checks of its own for sbx doctor (is the
// cluster reachable, are the resources it needs there).
type Doctor interface {
	Checks(ctx context.Context) []Check
}
