package spec

import "sort"

// Presets are named host lists for network.presets. Each is the set of hosts
// a tool needs for its API, sign-in and package downloads; the README lists
// them.
var presets = map[string][]string{
	"anthropic":      {"api.anthropic.com", "claude.ai", "console.anthropic.com", "platform.claude.com"},
	"openai":         {"api.openai.com", "auth.openai.com", "chatgpt.com"},
	"google-gemini":  {"accounts.google.com", "cloudcode-pa.googleapis.com", "generativelanguage.googleapis.com", "oauth2.googleapis.com"},
	"github":         {"*.githubusercontent.com", "api.github.com", "codeload.github.com", "github.com", "objects.githubusercontent.com", "raw.githubusercontent.com"},
	"github-copilot": {"*.githubcopilot.com", "api.github.com", "api.githubcopilot.com", "copilot-proxy.githubusercontent.com", "github.com"},
	"cursor":         {"*.cursor.sh", "api2.cursor.sh", "cursor.com"},
	"kiro":           {"*.kiro.dev", "kiro.dev", "prod.us-east-1.auth.desktop.kiro.dev"},
	"opencode":       {"*.opencode.ai", "models.dev", "opencode.ai"},
	"droid":          {"*.factory.ai", "api.factory.ai", "app.factory.ai"},
	"npm":            {"*.npmjs.org", "*.yarnpkg.com", "registry.npmjs.org", "registry.yarnpkg.com"},
	"pypi":           {"files.pythonhosted.org", "pypi.org"},
	"golang":         {"go.dev", "golang.org", "proxy.golang.org", "storage.googleapis.com", "sum.golang.org"},
	"docker-hub":     {"auth.docker.io", "index.docker.io", "production.cloudflare.docker.com", "registry-1.docker.io"},
}

// PresetNames returns the preset names, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func sortRules(rules []Rule) {
	sort.Slice(rules, func(i, j int) bool { return rules[i].Host < rules[j].Host })
}

// PresetHosts returns the hosts of a preset (nil for an unknown name).
func PresetHosts(name string) []string {
	return append([]string(nil), presets[name]...)
}
