// Package fakecli is the harness of the fake Docker Sandboxes CLIs in
// fakesbx (Docker's standalone `sbx`) and fakedocker (`docker sandbox`):
// CLI runs a fake's commands with what every fake shares (the argv log, the
// state file, the clock, the version knob, failure injection, JSON noise
// and mutations, error printing), so each fake holds only its behaviour.
// Also here: argv routing (Resolve), flag sets, tables and JSON, env
// handling, and running a command "inside" the sandbox (RunIn), which for
// the fakes is the host; fakeclitest runs a fake in a temporary world for
// its tests.
//
// The fakes are libraries, linked into test binaries (testscript.RunMain or
// a TestMain re-exec); they are never installed. Their environment knobs are
// listed in the package docs of fakesbx and fakedocker.
package fakecli
