package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/reconcile"
)

// TestFailureNameInUse: a create step that failed because the backend's
// name is taken says so and does not send the user to the template.
func TestFailureNameInUse(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"name_in_use", fmt.Errorf("the container name sbx-api is in use (%w)", reconcile.ErrNameInUse), "fix what holds the sandbox's name"},
		{"other", fmt.Errorf("no such image"), "fix the cause (template in sandbox.yaml, or the backend)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			a := &app{stdout: &bytes.Buffer{}, stderr: &stderr}
			se := &reconcile.StepError{Index: 3, Total: 5, Step: reconcile.Step{Kind: reconcile.StepCreate, Sandbox: "api"}, Err: tc.err}
			if code, _ := a.failure(se); code != exitError {
				t.Errorf("exit code %d", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.want)
			}
			if tc.name == "name_in_use" && strings.Contains(stderr.String(), "template") {
				t.Errorf("stderr blames the template: %q", stderr.String())
			}
		})
	}
}
