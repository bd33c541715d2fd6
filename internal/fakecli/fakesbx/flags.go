package fakesbx

import (
	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/fakecli"
)

func newFlags(name string) *pflag.FlagSet { return fakecli.Flags("sbx " + name) }
