package spec_test

import (
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// BenchmarkLoad measures loading one realistic file with the schema
// compiled once, as a multi-file `sbx validate` does.
func BenchmarkLoad(b *testing.B) {
	sch := compile(b)
	dir := b.TempDir()
	write(b, dir, "PROMPT.md", "x")
	f := write(b, dir, "sandbox.yaml", `version: 1
name: bench
agent: claude
env: {NODE_ENV: development, DATABASE_URL: "${DATABASE_URL:-postgresql://localhost/app}"}
secrets: {ANTHROPIC_API_KEY: {env: ANTHROPIC_API_KEY}}
resources: {cpus: 4, memory: 8g}
ports: ["3000", "127.0.0.1:8080:3000/tcp"]
network:
  presets: [anthropic, github, npm]
  allow: [api.example.com, "*.cdn.example.com", "registry.example.org:443"]
  deny: [pastebin.com]
loop: {prompt: PROMPT.md, maxIterations: 30, completion: {promise: COMPLETE, verify: ["go test ./..."]}, iterationTimeout: 15m}
`)
	opts := spec.Options{Schema: sch, NoLocal: true}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := spec.Load([]string{f}, opts); err != nil {
			b.Fatal(err)
		}
	}
	_ = filepath.Join
}
