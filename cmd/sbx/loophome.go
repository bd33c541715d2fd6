package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/loop"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// workOnCopy wires an agent whose sandbox works on its own copy of the
// workspace (a driver.Puller backend: kubernetes) to that copy: the loop
// measures its progress there, with sbx's binary inside the sandbox
// (driver.Helper), and pulls the copy home when the run ends, as sbx pull
// does. On other backends the agent works on the host's workspace and
// nothing changes.
func workOnCopy(s *session.Session, sp *spec.Spec, ag *loop.Agent) error {
	p, ok := s.Backend.(driver.Puller)
	if !ok {
		return ownGit(s, sp, ag)
	}
	h, ok := s.Backend.(driver.Helper)
	if !ok {
		return fmt.Errorf("the %s driver's sandboxes work on a copy of the workspace, without sbx's binary inside to measure the agent's progress there", s.Backend.Name())
	}
	ag.Progress = &loop.SandboxProgress{Exec: ag.Exec, Binary: h.SandboxHelper(), Dir: sp.Workspace.Path}
	ag.Pull = pullFunc(func(ctx context.Context) (*tarball.Stats, error) { return p.Pull(ctx, sp, io.Discard) })
	return nil
}

type pullFunc func(ctx context.Context) (*tarball.Stats, error)

func (f pullFunc) Pull(ctx context.Context) (*tarball.Stats, error) { return f(ctx) }

// ownGit wires an agent whose sandbox commits to a git directory of its
// own (driver.GitFetcher: docker, while workspace.protect is on): the
// loop measures progress inside the sandbox, where that directory is
// (HEAD, index), and brings the commits home (refs/sbx/NAME/*) when the
// run ends. The working tree is the host's either way.
func ownGit(s *session.Session, sp *spec.Spec, ag *loop.Agent) error {
	f, ok := s.Backend.(driver.GitFetcher)
	h, helper := s.Backend.(driver.Helper)
	if !ok || !helper || !sp.Protect || sp.Workspace.ReadOnly {
		return nil
	}
	ag.Progress = &loop.SandboxProgress{Exec: ag.Exec, Binary: h.SandboxHelper(), Dir: sp.Workspace.Path}
	ag.Fetch = func(ctx context.Context) (string, error) {
		var b strings.Builder
		err := f.FetchGit(ctx, sp, &b)
		return strings.TrimSpace(b.String()), err
	}
	return nil
}
