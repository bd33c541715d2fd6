// Package fakesbx is a fake of Docker's standalone Docker Sandboxes CLI
// `sbx`, for tests of sbx's "sbx" driver. It keeps its world in a JSON
// state file, logs every argv, and prints the shapes recorded from live
// `sbx` runs in /work/shared/reference/docker-sbx-evidence.md (cited per
// formatter as "evidence §N"; older, still-valid formats as
// "docker-sandboxes-cli.md §N"). What no capture shows is marked
// UNCONFIRMED where the fake makes it up. The "sandbox" is the host: `exec`
// runs the command locally.
//
// The fake reproduces how the CLI's surface changed between versions
// (FAKE_SBX_VERSION; the gates are the v* constants in main.go), in
// particular 0.42.0, 0.47.0 and 0.53.0: a flag a version does not have is
// rejected as cobra rejects it ("unknown flag: --no-input", exit 1).
//
// Secrets (secret.go) are kept as SHA-256 fingerprints only and never
// printed: a service secret's value comes from -t or stdin, a custom
// secret's --command is run through sh once to verify it (as Docker's sbx
// does), an overwrite without -f cancels silently with exit 0 on the
// fake's stdin, which is never a terminal (evidence §3.8), and `sbx rm`
// deletes the sandbox's secrets.
//
// Main is called with argv minus argv[0]; it is linked into test binaries,
// never installed.
//
// Environment knobs:
//
//	FAKE_SBX_STATE      path of the JSON state file (required; see fakestate)
//	FAKE_SBX_LOG        file to which every invocation appends its argv as one
//	                    JSON array line (hidden fake-* verbs are not logged)
//	FAKE_SBX_FAIL       comma-separated VERB or VERB:N; VERB is a command path
//	                    ("create", "policy allow", "secret set"); fail every call,
//	                    or only the Nth (from 1; counters live in the state file),
//	                    with a realistic error on stderr, exit 1, state unchanged
//	FAKE_SBX_HANG       a command path: that command never ends (killed only);
//	                    it first writes a line to FAKE_SBX_HANG_READY (a FIFO:
//	                    the test's handshake)
//	FAKE_SBX_VERSION    version the fake claims and whose CLI surface it mimics
//	                    (default 0.53.0)
//	FAKE_SBX_AUTO_STOP  "1": a sandbox not started with `run -d` is stopped
//	                    once its command ends (create, exec, run, ports
//	                    --publish), as the daemon's ~30 s idle auto-stop leaves
//	                    it (evidence §3.2); "0": it stays running. Default: on
//	                    from 0.43.0
//	FAKE_SBX_NOISE      "1"/"both", "before" or "after": print non-JSON lines
//	                    around every JSON document on stdout (evidence §1.1)
//	FAKE_SBX_MUTATE     change the JSON a command prints, to feed the driver
//	                    shapes no release printed: "COMMAND /POINTER=JSON" sets,
//	                    "COMMAND /POINTER" deletes, ";" separates
//	                    (fakecli.Mutate), e.g. "policy ls /rules/0/resources=5"
//	FAKE_SBX_SERVER_STATE  `version --json` server.state (default "running")
//	FAKE_NOW            the fake's clock, RFC 3339 (default 2026-11-11T12:00:00Z)
//	HOME                abbreviated to ~ in the `ls` table
//
// Hidden verbs for tests (not logged, not counted for failures):
//
//	sbx fake-add-log SANDBOX HOST[:PORT] allowed|blocked [--proxy P] [--rule R]
//	    [--reason R] [--count N] [--time RFC3339]
//	sbx fake-hide NAME      keep the name taken but drop it from ls (issue #109)
//	sbx fake-set-status NAME running|stopped
package fakesbx
