package loop

// MissingCommand starts the line a Grouper's command prints, followed by
// the command's name, when the command is not in the sandbox (then it
// exits 127).
const MissingCommand = "sbx-loop: command not found: "

// ShellGrouper starts the agent in its own session with setsid -w when the
// image has it (util-linux), recording the leader's pid, and kills the whole group with
// the shell's kill builtin. It needs only sh in the image; without setsid
// the agent and its direct process are still killed. A process the agent
// moves to a session of its own (setsid) is out of its reach: the shell
// cannot be a subreaper. The pid file is removed when the agent ends, so
// hours of iterations leave none behind.
type ShellGrouper struct{}

// Group wraps argv.
func (ShellGrouper) Group(argv []string, pidfile string) []string {
	script := `p="$1"; shift
[ -d "${p%/*}" ] || mkdir -m 1777 "${p%/*}" 2>/dev/null
command -v "$1" >/dev/null 2>&1 || { echo "` + MissingCommand + `$1" >&2; exit 127; }
if setsid -w true >/dev/null 2>&1; then
  setsid -w sh -c 'echo $$ > "$0"; exec "$@"' "$p" "$@"
else
  sh -c 'echo $$ > "$0"; exec "$@"' "$p" "$@"
fi
s=$?; rm -f "$p"; exit $s`
	return append([]string{"sh", "-c", script, "sbx-loop", pidfile}, argv...)
}

// Kill ends the group: SIGTERM, a grace period, then SIGKILL.
func (ShellGrouper) Kill(pidfile string) []string {
	script := `p=$(cat "$1" 2>/dev/null) || exit 0
kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
i=0; while [ $i -lt 10 ] && kill -0 -"$p" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
kill -KILL -"$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; rm -f "$1"; exit 0`
	return []string{"sh", "-c", script, "sbx-loop-kill", pidfile}
}

// HelperGrouper uses sbx's own static binary inside the sandbox (the docker
// driver mounts it): `__run-group` runs the agent as a process group leader
// under a subreaper and `__kill-group` ends every process the agent
// started, detached ones included, with no dependency on the image.
type HelperGrouper struct {
	Binary string // path inside the sandbox
}

// Group wraps argv.
func (h HelperGrouper) Group(argv []string, pidfile string) []string {
	return append([]string{h.Binary, "__run-group", pidfile, "--"}, argv...)
}

// Kill ends the group.
func (h HelperGrouper) Kill(pidfile string) []string {
	return []string{h.Binary, "__kill-group", pidfile}
}
