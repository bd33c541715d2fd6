package kubernetes

import (
	"bytes"
	"context"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/egress"
)

var _ driver.SecretProxy = (*Driver)(nil)

// TrustDir is where a sandbox finds its CA's certificate and a bundle of
// roots with it (egress.TrustMain writes them, inside the pod): in the
// pod's in-memory runDir, the sandbox's own, which the template's user
// may write whoever it is (an emptyDir is world-writable), since
// kubectl exec runs the helper as that user.
const TrustDir = runDir + "/ca"

// SetSecrets hands the proxy of the sandbox (the pool's, for a warm
// sandbox claimed for it) its CA, its secrets and the roots this host
// trusts (driver.HostRoots: the helper image the proxy runs has none)
// over the proxy's control channel: pods/attach to its container's
// stdin. The request goes on kubectl's stdin, which the runner does not
// trace, so the values and the CA's key live in the proxy's memory only,
// never in argv, an object or a trace. Then sbx's helper in the sandbox's
// pod makes its commands trust the CA (kubectl exec, the certificate on
// its stdin).
func (d *Driver) SetSecrets(ctx context.Context, name string, caPEM []byte, secrets []driver.ProxySecret) (map[string]string, error) {
	p, proxy := d.proxyOf(name)
	_, pod := d.target(name)
	return driver.SetProxySecrets(ctx, name, caPEM, secrets, driver.SecretsVia{
		Control: func(ctx context.Context, req egress.ControlRequest) (*egress.ControlReply, error) {
			return d.control(ctx, p, proxy, req)
		},
		Trust: func(ctx context.Context, dir string, certPEM []byte) error {
			_, err := d.runInput(ctx, p, bytes.NewReader(certPEM), "exec", "-i", pod, "-c", AgentContainer, "--", helperPath, egress.TrustVerb, dir)
			return err
		},
		TrustDir:  TrustDir,
		LookupEnv: d.opts.Runner.LookupEnv,
	})
}

var _ driver.SecretFiles = (*Driver)(nil)

// WriteSecretFile has sbx's helper in the sandbox's pod write a file
// secret's copy (placeholders in place of its credentials), the file on
// its stdin (kubectl exec). It runs as the pod's user, which is the
// sandbox's.
func (d *Driver) WriteSecretFile(ctx context.Context, name, user, path string, data []byte) error {
	p, pod := d.target(name)
	_, err := d.runInput(ctx, p, bytes.NewReader(data), "exec", "-i", pod, "-c", AgentContainer, "--", helperPath, egress.SecretFileVerb, path)
	return err
}
