package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/egress"
)

// TestSetProxySecrets: the proxy gets the CA, the values and the roots in
// one control request; the sandbox gets the CA's certificate only; each
// exec gets the placeholders and the trust variables; a proxy that
// refuses, fails or takes other secrets fails the call, naming the
// sandbox and never a value, and then the sandbox is not touched. No
// secrets clear the proxy's, with neither CA nor roots, and touch
// nothing in the sandbox.
func TestSetProxySecrets(t *testing.T) {
	ca, err := egress.NewCA("box")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := ca.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	const value = "the-real-value-42"
	secrets := []ProxySecret{{Name: "API_KEY", Placeholder: "sbx-placeholder-0123456789", Value: value, Hosts: []string{"api.example.com"}}}
	// The host's roots: the file SSL_CERT_FILE names, as sbx's
	// environment has it.
	roots := []byte("-----BEGIN CERTIFICATE-----\nroots\n-----END CERTIFICATE-----\n")
	dir := t.TempDir()
	rootsFile, largeFile := filepath.Join(dir, "roots.pem"), filepath.Join(dir, "large.pem")
	if err := os.WriteFile(rootsFile, roots, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(largeFile, make([]byte, maxSentRoots+1), 0o644); err != nil {
		t.Fatal(err)
	}
	sslCertFile := func(f string) func(string) (string, bool) {
		return func(k string) (string, bool) { return f, k == "SSL_CERT_FILE" }
	}
	for _, tc := range []struct {
		name  string
		reply *egress.ControlReply
		err   error
		roots string // SSL_CERT_FILE; the test's roots when ""
		want  string // in the error; "" for success
	}{
		{name: "taken", reply: &egress.ControlReply{Secrets: []string{"API_KEY"}}},
		{name: "refused", reply: &egress.ControlReply{Error: "secret API_KEY names no host"}, want: `the egress proxy of "box" refused its secrets: secret API_KEY names no host`},
		{name: "other secrets", reply: &egress.ControlReply{Secrets: []string{}}, want: `the egress proxy of "box" took secrets [], not ["API_KEY"]`},
		{name: "no answer", err: errors.New("the attach ended"), want: `handing the secrets of "box" to its egress proxy: the attach ended`},
		{name: "roots too large", roots: largeFile, want: `sandbox "box": the CA bundle its egress proxy verifies upstreams with is`},
		{name: "no roots", roots: filepath.Join(dir, "absent.pem"), want: `sandbox "box": this host has no CA bundle for its egress proxy`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.roots == "" {
				tc.roots = rootsFile
			}
			var sent []egress.ControlRequest
			var trusted []string
			env, err := SetProxySecrets(context.Background(), "box", caPEM, secrets, SecretsVia{
				Control: func(_ context.Context, req egress.ControlRequest) (*egress.ControlReply, error) {
					sent = append(sent, req)
					return tc.reply, tc.err
				},
				Trust: func(_ context.Context, dir string, certPEM []byte) error {
					trusted = append(trusted, dir+" "+string(certPEM))
					return nil
				},
				TrustDir:  "/run/ca",
				LookupEnv: sslCertFile(tc.roots),
			})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), value) {
					t.Fatalf("error %v, want one with %q and no value", err, tc.want)
				}
				if len(trusted) > 0 {
					t.Errorf("the sandbox was made to trust the CA after a failure")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantReq := []egress.ControlRequest{{Op: "secrets", CA: caPEM, Roots: roots, Secrets: []egress.Secret{
				{Name: "API_KEY", Placeholder: "sbx-placeholder-0123456789", Value: value, Hosts: []string{"api.example.com"}}}}}
			if diff := cmp.Diff(wantReq, sent); diff != "" {
				t.Errorf("control requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"/run/ca " + string(ca.CertPEM())}, trusted); diff != "" {
				t.Errorf("trust (-want +got):\n%s", diff)
			}
			wantEnv := egress.TrustEnv("/run/ca")
			wantEnv["API_KEY"] = "sbx-placeholder-0123456789"
			if diff := cmp.Diff(wantEnv, env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		var sent []egress.ControlRequest
		env, err := SetProxySecrets(context.Background(), "box", caPEM, nil, SecretsVia{
			Control: func(_ context.Context, req egress.ControlRequest) (*egress.ControlReply, error) {
				sent = append(sent, req)
				return &egress.ControlReply{}, nil
			},
			Trust: func(context.Context, string, []byte) error {
				t.Error("the sandbox was made to trust a CA for no secret")
				return nil
			},
			TrustDir:  "/run/ca",
			LookupEnv: sslCertFile(rootsFile),
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]egress.ControlRequest{{Op: "secrets", Secrets: []egress.Secret{}}}, sent); diff != "" {
			t.Errorf("control requests (-want +got):\n%s", diff)
		}
		if len(env) != 0 {
			t.Errorf("env %v, want none", env)
		}
	})
}
