//go:build tools

// Package tools records the command test/kubernetes/cluster builds from this
// module, so go mod tidy keeps its dependencies.
package tools

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
