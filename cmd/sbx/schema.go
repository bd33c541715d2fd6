package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/schema"
)

func schemaVerb() *verb {
	return &verb{
		name:    "schema",
		summary: "print the JSON Schema of sandbox.yaml",
		usage:   "",
		help: `Prints the draft-07 JSON Schema that sbx validates against, for editors:
save it and point a "# yaml-language-server: $schema=PATH" modeline at it.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("schema takes no arguments")
				}
				a.stdout.Write(schema.JSON)
				return exitOK
			}
		},
	}
}
