package fakedocker

import (
	"testing"

	"github.com/sbxhq/sbx/internal/fakecli/fakeclitest"
)

type step = fakeclitest.Step

func newWorld(t *testing.T) *fakeclitest.World {
	return fakeclitest.New(t, "docker", "FAKE_DOCKER", Main)
}
