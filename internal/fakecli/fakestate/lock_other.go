//go:build !unix

package fakestate

import "os"

// The fakes only run in tests on Unix; elsewhere invocations are not
// serialised.
func lock(*os.File) error   { return nil }
func unlock(*os.File) error { return nil }
