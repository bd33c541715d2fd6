package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/egress"
)

var _ driver.SecretProxy = (*Driver)(nil)

// trustDir is where a sandbox finds its CA's certificate and a bundle of
// its roots with it (egress.TrustMain writes them, inside the sandbox);
// sbx never reads anything back from the sandbox for it.
const trustDir = "/.sbx-ca"

// trustTimeout bounds the helper's run.
const trustTimeout = time.Minute

// SetSecrets hands the sandbox's proxy its CA and secrets over the
// control channel (the container's stdin, which only holders of the
// Docker API can attach to), so the values live in the proxy's memory
// only, and has sbx's helper in the sandbox make its commands trust the
// CA (its certificate on the helper's stdin).
func (d *Driver) SetSecrets(ctx context.Context, name string, caPEM []byte, secrets []driver.ProxySecret) (map[string]string, error) {
	var ca *egress.CA
	if len(secrets) > 0 {
		var err error
		if ca, err = egress.ParseCA(caPEM); err != nil {
			return nil, err
		}
	} else {
		caPEM = nil // none to add: the proxy terminates nothing
	}
	eg := egressName(name)
	req := egress.ControlRequest{Op: "secrets", CA: caPEM, Secrets: []egress.Secret{}}
	for _, s := range secrets {
		req.Secrets = append(req.Secrets, egress.Secret{Name: s.Name, Placeholder: s.Placeholder, Value: s.Value, Hosts: s.Hosts})
	}
	rep, err := d.api.control(ctx, eg, req)
	if err != nil {
		return nil, fmt.Errorf("handing the secrets of %q to its egress proxy: %v", name, err)
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("the egress proxy of %q refused its secrets: %s", name, rep.Error)
	}
	env := map[string]string{}
	if len(secrets) == 0 {
		return env, nil
	}
	// The helper reads and writes only the sandbox's files; a sandbox
	// that makes it wait (a FIFO it does not open) fails the call, not
	// hangs it.
	tctx, cancel := context.WithTimeout(ctx, trustTimeout)
	defer cancel()
	var stderr bytes.Buffer
	code, err := d.api.exec(tctx, containerName(name), []string{helperPath, egress.TrustVerb, trustDir},
		driver.ExecOptions{Interactive: true, User: "0", Stdin: bytes.NewReader(ca.CertPEM()), Stdout: io.Discard, Stderr: &stderr})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return nil, fmt.Errorf("making sandbox %q trust its CA: %v", name, err)
	}
	for k, v := range egress.TrustEnv(trustDir) {
		env[k] = v
	}
	for _, s := range secrets {
		env[s.Name] = s.Placeholder
	}
	return env, nil
}
