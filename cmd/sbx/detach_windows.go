//go:build windows

package main

import (
	"context"
	"errors"
	"os"

	"github.com/sbxhq/sbx/loop"
)

var errNoDetach = errors.New("--detach needs Linux or macOS: on Windows, run sbx loop in a window of its own (start sbx loop -y)")

// canDetach says whether this system can run a loop in the background:
// not Windows, where a run's lock cannot be handed to another process.
func canDetach() error { return errNoDetach }

func (a *app) detach(ctx context.Context, run *loop.Run, o *loopFlags, term stdio) error {
	return errNoDetach
}

func inheritedFiles(n int) ([]*os.File, *os.File, error) { return nil, nil, errNoDetach }

func ignoreHangup() {}
