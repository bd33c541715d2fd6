// Package fakecli holds the plumbing shared by the fake Docker Sandboxes
// CLIs in fakesbx (Docker's standalone `sbx`) and fakedocker (`docker
// sandbox`): argv logging, failure injection, the clock, version gates,
// table and JSON output, environment handling and running a command "inside"
// the sandbox, which for the fakes is the host.
//
// The fakes are libraries, linked into test binaries (testscript.RunMain or
// a TestMain re-exec); they are never installed. Their environment knobs are
// listed in the package docs of fakesbx and fakedocker.
package fakecli
