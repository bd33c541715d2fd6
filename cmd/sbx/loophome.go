package main

import (
	"fmt"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/loop"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// workOnCopy wires an agent whose sandbox works on its own copy of the
// workspace (a driver.Puller backend: kubernetes) to that copy: the loop
// measures its progress there, with sbx's binary inside the sandbox
// (driver.Helper). On other backends the agent works on the host's
// workspace and nothing changes.
func workOnCopy(s *session.Session, sp *spec.Spec, ag *loop.Agent) error {
	if _, ok := s.Backend.(driver.Puller); !ok {
		return nil
	}
	h, ok := s.Backend.(driver.Helper)
	if !ok {
		return fmt.Errorf("the %s driver's sandboxes work on a copy of the workspace, without sbx's binary inside to measure the agent's progress there", s.Backend.Name())
	}
	ag.Progress = &loop.SandboxProgress{Exec: ag.Exec, Binary: h.SandboxHelper(), Dir: sp.Workspace.Path}
	return nil
}
