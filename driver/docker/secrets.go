package docker

import (
	"context"
	"fmt"
	"path"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/egress"
)

var _ driver.SecretProxy = (*Driver)(nil)

// caPath is where a sandbox finds its CA's certificate, the one its
// commands trust for the hosts the proxy adds secrets for. The daemon
// writes it (PUT archive, as docker cp does); sbx never reads anything
// back from the sandbox for it.
const caPath = "/sbx-ca.pem"

// SetSecrets hands the sandbox's proxy its CA and secrets over the
// control channel (the container's stdin, which only holders of the
// Docker API can attach to), so the values live in the proxy's memory
// only, and writes the CA's certificate into the sandbox.
func (d *Driver) SetSecrets(ctx context.Context, name string, caPEM []byte, secrets []driver.ProxySecret) (map[string]string, error) {
	ca, err := egress.ParseCA(caPEM)
	if err != nil {
		return nil, err
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
	if err := d.api.writeFile(ctx, containerName(name), path.Dir(caPath), path.Base(caPath), ca.CertPEM(), 0o644); err != nil {
		return nil, fmt.Errorf("writing the CA of %q into it: %v", name, err)
	}
	env := map[string]string{"NODE_EXTRA_CA_CERTS": caPath}
	for _, s := range secrets {
		env[s.Name] = s.Placeholder
	}
	return env, nil
}
