// Package fakesbx is a fake of Docker's standalone Docker Sandboxes CLI
// `sbx` (generation "G3"), for tests of sbx's "sbx" driver. It keeps its
// world in a JSON state file, logs every argv, and prints the output formats
// recorded in /work/shared/reference/docker-sandboxes-cli.md (cited per
// formatter as "docker-sandboxes-cli.md §N"). The "sandbox" is the host:
// `exec` runs the command locally.
//
// Main is called with argv minus argv[0]; it is linked into test binaries,
// never installed.
//
// Environment knobs:
//
//	FAKE_SBX_STATE          path of the JSON state file (required; see fakestate)
//	FAKE_SBX_LOG            file to which every invocation appends its argv as one
//	                        JSON array line (hidden fake-* verbs are not logged)
//	FAKE_SBX_FAIL           comma-separated VERB or VERB:N; VERB is a command path
//	                        ("create", "policy allow", "secret set"); fail every call,
//	                        or only the Nth (from 1; counters live in the state file),
//	                        with a realistic error on stderr, exit 1, state unchanged
//	FAKE_SBX_VERSION        version the fake claims and whose CLI surface it mimics
//	                        (default 0.53.0); see the version gates in Main
//	FAKE_SBX_LS_SHAPE       `ls --json` top level: "sandboxes" (default, §2.6),
//	                        "array" (legacy bare array, §2.6) or "vms" (the G2 key)
//	FAKE_SBX_NOISE          "1"/"both", "before" or "after": print non-JSON lines
//	                        around every JSON document on stdout (§2.6, §8)
//	FAKE_SBX_CREATE_STATUS  status of a newly created sandbox (default "running";
//	                        "stopped" models the 0.43.0 idle auto-stop)
//	FAKE_SBX_SERVER_STATE   `version --json` server.state (default "running";
//	                        "unavailable" per §1.3)
//	FAKE_NOW                the fake's clock, RFC 3339 (default 2026-11-11T12:00:00Z)
//	HOME                    abbreviated to ~ in the `ls` table (§2.5)
//
// Hidden verbs for tests (not logged, not counted for failures):
//
//	sbx fake-add-log SANDBOX HOST allowed|blocked [--type network] [--proxy P]
//	    [--rule R] [--reason R] [--count N] [--time RFC3339]
//	sbx fake-hide NAME      keep the name taken but drop it from ls (issue #109)
//	sbx fake-set-status NAME running|stopped
package fakesbx
