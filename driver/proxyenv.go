package driver

import (
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/spec"
)

// ProxyURL is where a sandbox's clients find its egress proxy: sbx's
// bridge on the sandbox's own loopback, on every backend sbx runs the
// proxy for.
var ProxyURL = "http://127.0.0.1:" + strconv.Itoa(spec.ProxyPort)

// ProxyEnv is the environment (KEY=VALUE) that points a sandbox's
// clients at ProxyURL, but for loopback and the names direct (the
// services', which are the sandbox's loopback too).
func ProxyEnv(direct ...string) []string {
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env = append(env, k+"="+ProxyURL)
	}
	no := strings.Join(append([]string{"localhost", "127.0.0.1", "::1"}, direct...), ",")
	return append(env, "NO_PROXY="+no, "no_proxy="+no)
}
