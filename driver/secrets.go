package driver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sbxhq/sbx/egress"
)

// SecretsVia is how a backend reaches a sandbox for SetSecrets.
type SecretsVia struct {
	// Control sends one request on the control channel of the sandbox's
	// proxy and returns the reply to it. The request holds the secrets'
	// values and the CA's key: it goes on the channel's stdin only,
	// never in argv, an object or a trace.
	Control func(ctx context.Context, req egress.ControlRequest) (*egress.ControlReply, error)
	// Trust runs sbx's helper in the sandbox, egress.TrustVerb dir, with
	// the CA's certificate (never its key) on its stdin.
	Trust func(ctx context.Context, dir string, certPEM []byte) error
	// TrustDir is where in the sandbox the helper writes the CA's files:
	// a directory its commands' user may create.
	TrustDir string
	// LookupEnv reads sbx's environment, for HostRoots: the roots the
	// proxy verifies the upstreams with go with the secrets (its image
	// has none).
	LookupEnv func(string) (string, bool)
}

// maxSentRoots bounds the roots sent with the secrets: the control
// channel takes lines of 4 MiB, and JSON grows bytes by a third.
const maxSentRoots = 2 << 20

// trustTimeout bounds the helper's run: it reads and writes only the
// sandbox's files, and a sandbox that makes it wait (a FIFO it does not
// open) fails the call, not hangs it.
const trustTimeout = time.Minute

// SetProxySecrets is SetSecrets on any backend, given how it reaches the
// sandbox: it hands the proxy the CA (certificate and key) and the
// secrets, in one control request, checks that the proxy took exactly
// those (a reply names them, never a value), has the sandbox trust the
// CA's certificate, and returns the environment of each exec: the
// placeholders under the secrets' names, and egress.TrustEnv. No
// secrets clear the proxy's, without a CA, and need nothing of the
// sandbox.
func SetProxySecrets(ctx context.Context, name string, caPEM []byte, secrets []ProxySecret, via SecretsVia) (map[string]string, error) {
	var ca *egress.CA
	if len(secrets) > 0 {
		var err error
		if ca, err = egress.ParseCA(caPEM); err != nil {
			return nil, fmt.Errorf("sandbox %q: %v", name, err)
		}
	} else {
		caPEM = nil // none to add: the proxy terminates nothing
	}
	req := egress.ControlRequest{Op: "secrets", CA: caPEM, Secrets: []egress.Secret{}}
	if len(secrets) > 0 {
		roots, err := HostRoots(via.LookupEnv)
		switch {
		case err != nil:
			return nil, fmt.Errorf("sandbox %q: the CA bundle its egress proxy verifies upstreams with: %v", name, err)
		case len(roots) == 0:
			return nil, fmt.Errorf("sandbox %q: this host has no CA bundle for its egress proxy to verify the secrets' hosts with (none of %s): set SSL_CERT_FILE to one", name, strings.Join(egress.SystemBundles, ", "))
		case len(roots) > maxSentRoots:
			return nil, fmt.Errorf("sandbox %q: the CA bundle its egress proxy verifies upstreams with is %d bytes, over the %d the proxy takes with the secrets (SSL_CERT_FILE names a smaller one)", name, len(roots), maxSentRoots)
		}
		req.Roots = roots
	}
	names := []string{}
	for _, s := range secrets {
		req.Secrets = append(req.Secrets, egress.Secret{Name: s.Name, Placeholder: s.Placeholder, Value: s.Value, Hosts: s.Hosts})
		names = append(names, s.Name)
	}
	rep, err := via.Control(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("handing the secrets of %q to its egress proxy: %v", name, err)
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("the egress proxy of %q refused its secrets: %s", name, rep.Error)
	}
	if !slices.Equal(rep.Secrets, names) {
		return nil, fmt.Errorf("the egress proxy of %q took secrets %q, not %q", name, rep.Secrets, names)
	}
	env := map[string]string{}
	if len(secrets) == 0 {
		return env, nil
	}
	tctx, cancel := context.WithTimeout(ctx, trustTimeout)
	defer cancel()
	if err := via.Trust(tctx, via.TrustDir, ca.CertPEM()); err != nil {
		return nil, fmt.Errorf("making sandbox %q trust its CA: %v", name, err)
	}
	for k, v := range egress.TrustEnv(via.TrustDir) {
		env[k] = v
	}
	for _, s := range secrets {
		if s.InFile == "" {
			env[s.Name] = s.Placeholder
		}
	}
	return env, nil
}
