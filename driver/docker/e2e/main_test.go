// Package e2e tests the docker driver end to end through the static sbx a
// user runs, on a real daemon: the lifecycle verbs and checkpoints, the
// agent loop, workspace ownership, users and named networks. The tests
// that drive the driver's Go API directly are in package docker; both
// share internal/dockertest's setup.
package e2e

import (
	"os"
	"testing"

	"github.com/sbxhq/sbx/internal/dockertest"
)

var env = dockertest.New("docker-e2e")

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }
