// Package fakedocker is a fake `docker` binary that implements the Docker
// Desktop `docker sandbox` CLI plugin (generation "G2", plugin v0.7.1+,
// microVMs), for tests of sbx's legacy "docker-sandbox" driver (Docker has
// removed the plugin). It runs on the fakecli harness. It keeps its world
// in a JSON state file, logs every argv, and prints the output formats
// recorded in /work/shared/reference/docker-sandboxes-cli.md (cited per
// formatter). Any other docker command fails as docker does for an unknown
// command. The "sandbox" is the host: `exec` runs the command locally.
//
// Main is called with argv minus argv[0]; it is linked into test binaries,
// never installed.
//
// Environment knobs:
//
//	FAKE_DOCKER_STATE            path of the JSON state file (required; see fakestate)
//	FAKE_DOCKER_LOG              file to which every invocation appends its argv
//	                             (["sandbox","ls","--json"]) as one JSON array line
//	                             (hidden fake-* verbs are not logged)
//	FAKE_DOCKER_FAIL             comma-separated VERB or VERB:N, VERB a command path
//	                             under `docker sandbox` ("create", "network proxy");
//	                             fail every call or only the Nth (from 1; counters in
//	                             the state file): error on stderr, exit 1, state unchanged
//	FAKE_DOCKER_HANG             a command path: that command never ends (killed
//	                             only); it first writes a line to FAKE_DOCKER_HANG_READY
//	                             (a FIFO: the test's handshake)
//	FAKE_DOCKER_SANDBOX_VERSION  plugin version (default 0.12.0, the newest working
//	                             one the reference names; 0.7.x has the v0.7.1 flags;
//	                             0.13.0+ models Desktop 4.80, where every verb but
//	                             version only prints the deprecation notice)
//	FAKE_DOCKER_NO_SANDBOX       "1": no sandbox plugin (`docker sandbox` is unknown)
//	FAKE_DOCKER_LS_SHAPE         `ls --json` top-level key: "vms" (default, §2.3) or
//	                             "sandboxes" ([3P], §2.3)
//	FAKE_DOCKER_LS_STOPPED_WORKSPACES
//	                             "1": list workspaces of stopped VMs in `ls --json`
//	                             (the §2.3 example omits them)
//	FAKE_DOCKER_NOISE            "1"/"both", "before" or "after": non-JSON lines
//	                             around every JSON document on stdout
//	FAKE_DOCKER_CREATE_STATUS    status of a new sandbox (default "running")
//	FAKE_DOCKER_MUTATE           change the JSON a command prints (fakecli.Mutate),
//	                             e.g. "ls /vms/0/status"
//	FAKE_NOW                     the clock, RFC 3339 (default 2026-11-11T12:00:00Z)
//	HOME                         used in socket paths (§2.3)
//
// Hidden verbs for tests (not logged, not counted for failures):
//
//	docker sandbox fake-add-log SANDBOX METHOD URL allowed|denied [--time RFC3339]
//	docker sandbox fake-set-status NAME running|stopped
package fakedocker
