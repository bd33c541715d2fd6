package main

import (
	"fmt"
	"os"

	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/driver/dockersandbox"
	"github.com/sbxhq/sbx/driver/sbx"
)

// newBackend constructs a driver by name. Constructing one runs nothing;
// Version probes it.
func (a *app) newBackend(name string) (backend, error) {
	switch name {
	case "sbx":
		bin, err := a.dockerSbx()
		if err != nil {
			return nil, err
		}
		return sbx.New(sbx.Options{Runner: a.runner(), Binary: bin, Docker: a.docker()}), nil
	case "docker-sandbox":
		return dockersandbox.New(dockersandbox.Options{Runner: a.runner(), Docker: a.docker()}), nil
	case "docker":
		bin := a.getenv("SBX_STATIC_BINARY")
		if bin == "" {
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			bin = self
		}
		return docker.New(docker.Options{Runner: a.runner(), Docker: a.docker(), Binary: bin}), nil
	}
	return nil, fmt.Errorf("unknown driver %q (drivers: sbx, docker-sandbox, docker)", name)
}
