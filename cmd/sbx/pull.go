package main

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/spec"
)

// pullVerb and pushVerb copy the workspace between the host and a
// sandbox that works on a copy of it (the kubernetes driver's volume).
func pullVerb() *verb { return copyVerb("pull", true) }
func pushVerb() *verb { return copyVerb("push", false) }

func copyVerb(name string, pull bool) *verb {
	summary, help := "copy the sandbox's workspace back over the host's (kubernetes), fetch its commits (docker, kubernetes)",
		`Copies the sandbox's copy of the workspace over the host workspace. What
comes back was written by the agent: nothing lands outside the workspace,
nothing is written through a symlink, a symlink comes back only if it
leads inside the workspace through every other link (as the kernel
resolves it: with s -> ., t -> s/.. leads out), devices and FIFOs are
skipped, of a nested .git only objects, refs, logs, HEAD, index and
packed-refs come back (never its config, config.worktree, commondir,
hooks, info, worktrees or modules, nor a .git file), and while
workspace.protect is on the sandbox's own declaration and its prompt are
never written. Nothing is deleted. The workspace's own .git is never
written: the sandbox's commits come home by git's fetch, into
refs/sbx/NAME/HEAD and refs/sbx/NAME/heads/*.

On the docker driver, where the workspace is shared, sbx pull only
fetches the commits of the sandbox's own .git the same way.`
	if !pull {
		summary, help = "copy the host workspace over the sandbox's (kubernetes driver)",
			`Copies the host workspace over the sandbox's copy of it. Nothing in the
sandbox is deleted.`
	}
	return &verb{
		name:    name,
		summary: summary,
		usage:   "[flags]",
		help:    help,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("%s takes no arguments; name files with -f", name)
				}
				s, sp, err := a.one(ctx, t)
				if err != nil {
					return a.fail(err)
				}
				p, ok := s.Backend.(driver.Puller)
				if f, own := s.Backend.(driver.GitFetcher); !ok && own && pull {
					// The workspace is shared; only the sandbox's own
					// git directory has something to bring home.
					if err := f.FetchGit(ctx, sp, a.stdout); err != nil {
						return a.errorf("%v", err)
					}
					return exitOK
				}
				if !ok {
					return a.errorf("the %s driver shares the workspace with the sandbox: there is nothing to %s", s.Backend.Name(), name)
				}
				copyFn := p.Push
				if pull {
					copyFn = func(ctx context.Context, sp *spec.Spec, w io.Writer) error {
						_, err := p.Pull(ctx, sp, w)
						return err
					}
				}
				if err := copyFn(ctx, sp, a.stdout); err != nil {
					// The error may quote what the agent named its files.
					return a.errorf("%s", untrusted.Line(err.Error()))
				}
				return exitOK
			}
		},
	}
}
