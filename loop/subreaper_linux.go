package loop

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process the child subreaper of its tree
// (prctl(2) PR_SET_CHILD_SUBREAPER): orphaned descendants are reparented
// to it rather than to init, so the agent cannot move a process out of
// reach of the iteration kill by detaching it.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("becoming the agent's subreaper: %v", err)
	}
	return nil
}
