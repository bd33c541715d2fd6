package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/internal/untrusted"
)

// Puller copies a sandbox's own copy of the workspace back over the
// host's (driver.Puller, for one sandbox): on backends whose sandboxes
// work on a copy (kubernetes), the run's work is there until it is
// pulled. What comes back was written by the agent; Pull keeps it inside
// the workspace, away from protected files and within bounds, and says
// what it copied and skipped.
type Puller interface {
	Pull(ctx context.Context) (*tarball.Stats, error)
}

// interruptedPull bounds pulling the work home after the run was
// interrupted (Ctrl-C, sbx loop stop): long enough for a workspace of
// source files, short enough that the interrupt still ends sbx promptly.
// What it leaves behind, sbx pull copies.
const interruptedPull = 15 * time.Second

// pullHome copies each sandbox's workspace home once the run has ended,
// whatever its state, and says what it did in one line per sandbox. A
// failure is added to the run's detail. ctx is the run's: when it is done
// (interrupted) the pull gets a short time of its own.
func (it *iterator) pullHome(ctx context.Context, res *Result) {
	for i := range it.cfg.Agents {
		ag := &it.cfg.Agents[i]
		if ag.Fetch != nil {
			it.fetchHome(ctx, ag, res)
		}
		if ag.Pull == nil {
			continue
		}
		it.run.SetPhase(PhasePulling)
		pctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), interruptedPull)
			defer cancel()
		}
		whose := "the sandbox's"
		if len(it.cfg.Agents) > 1 {
			whose = fmt.Sprintf("sandbox %q's", ag.Sandbox)
		}
		st, err := ag.Pull.Pull(pctx)
		if err != nil {
			// The error may name the agent's files.
			why := untrusted.Text(err.Error())
			if pctx.Err() != nil {
				why = "interrupted"
				if ctx.Err() != nil {
					why = fmt.Sprintf("not done within %s of the interrupt", interruptedPull)
				}
			}
			it.say("pulling %s workspace home failed: %s; sbx pull copies it", whose, why)
			res.Detail += fmt.Sprintf("; %s workspace was not pulled home (%s): run sbx pull", whose, why)
			continue
		}
		it.say("pulled %s workspace home: %s", whose, pulled(st))
	}
}

// pulled says what a pull copied, and how many entries it skipped (a
// protected file the agent changed, a link out of the workspace): their
// names would crowd the line; sbx pull names them all.
func pulled(st *tarball.Stats) string {
	s := plural(st.Files, "file")
	switch n := len(st.Skipped) + st.SkippedMore; n {
	case 0:
		return s
	case 1:
		return s + "; 1 entry skipped (sbx pull says which)"
	default:
		return fmt.Sprintf("%s; %d entries skipped (sbx pull says which)", s, n)
	}
}

// fetchHome brings the commits of a sandbox with a git directory of its
// own into the host's repository, as sbx pull does; a failure is added to
// the run's detail.
func (it *iterator) fetchHome(ctx context.Context, ag *Agent, res *Result) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), interruptedPull)
		defer cancel()
	}
	said, err := ag.Fetch(ctx)
	if err != nil {
		why := untrusted.Text(err.Error())
		it.say("bringing sandbox %q's commits home failed: %s; sbx pull fetches them", ag.Sandbox, why)
		res.Detail += fmt.Sprintf("; sandbox %q's commits were not fetched (%s): run sbx pull", ag.Sandbox, why)
		return
	}
	it.say("%s", untrusted.Text(said))
}
