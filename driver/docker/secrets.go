package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/egress"
)

var _ driver.SecretProxy = (*Driver)(nil)

// trustDir is where a sandbox finds its CA's certificate and a bundle of
// its roots with it (egress.TrustMain writes them, inside the sandbox);
// sbx never reads anything back from the sandbox for it.
const trustDir = "/.sbx-ca"

// SetSecrets hands the sandbox's proxy its CA and secrets over the
// control channel (the container's stdin, which only holders of the
// Docker API can attach to), so the values live in the proxy's memory
// only, and has sbx's helper in the sandbox make its commands trust the
// CA (its certificate on the helper's stdin, as root). The host's roots,
// which the proxy verifies the upstreams with, go with the secrets.
func (d *Driver) SetSecrets(ctx context.Context, name string, caPEM []byte, secrets []driver.ProxySecret) (map[string]string, error) {
	return driver.SetProxySecrets(ctx, name, caPEM, secrets, driver.SecretsVia{
		Control: func(ctx context.Context, req egress.ControlRequest) (*egress.ControlReply, error) {
			return d.api.control(ctx, EgressName(name), req)
		},
		Trust: func(ctx context.Context, dir string, certPEM []byte) error {
			var stderr bytes.Buffer
			code, err := d.api.exec(ctx, ContainerName(name), []string{helperPath, egress.TrustVerb, dir},
				driver.ExecOptions{Interactive: true, User: "0", Stdin: bytes.NewReader(certPEM), Stdout: io.Discard, Stderr: &stderr})
			if err == nil && code != 0 {
				err = fmt.Errorf("exit status %d: %s", code, strings.TrimSpace(stderr.String()))
			}
			return err
		},
		TrustDir:  trustDir,
		LookupEnv: d.opts.Runner.LookupEnv,
	})
}

var _ driver.SecretFiles = (*Driver)(nil)

// WriteSecretFile has sbx's helper in the sandbox write a file secret's
// copy (placeholders in place of its credentials) as user, the file on
// its stdin.
func (d *Driver) WriteSecretFile(ctx context.Context, name, user, path string, data []byte) error {
	var stderr bytes.Buffer
	code, err := d.api.exec(ctx, ContainerName(name), []string{helperPath, egress.SecretFileVerb, path},
		driver.ExecOptions{Interactive: true, User: user, Stdin: bytes.NewReader(data), Stdout: io.Discard, Stderr: &stderr})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	return err
}
