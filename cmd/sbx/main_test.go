package main

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"sbx": func() { os.Exit(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)) },
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script, one per
// behaviour, named after the verb.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			e.Setenv("HOME", e.WorkDir+"/home")
			return nil
		},
		UpdateScripts: os.Getenv("SBX_UPDATE_SCRIPTS") == "1",
	})
}
