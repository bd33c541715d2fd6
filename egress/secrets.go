package egress

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sbxhq/sbx/spec"
)

// Secret is a value the proxy adds to the requests for its hosts, in
// place of the placeholder the sandbox holds: the sandbox never has the
// value. The proxy holds it in memory only (SetSecrets).
type Secret struct {
	Name        string   `json:"name"`
	Placeholder string   `json:"placeholder"`
	Value       string   `json:"value"`
	Hosts       []string `json:"hosts"`
}

// minPlaceholder is the shortest placeholder the proxy takes: shorter
// ones could occur in a request by chance.
const minPlaceholder = 16

// secretSet is the compiled secrets, the CA that the proxy shows the
// sandbox their hosts' certificates from, and the roots that verify
// their upstreams when they came with them (nil: the proxy's own).
type secretSet struct {
	ca    *CA
	roots *x509.CertPool
	list  []compiledSecret
}

type compiledSecret struct {
	Secret
	hosts []rule
}

func compileSecrets(ca *CA, ss []Secret) (*secretSet, error) {
	set := &secretSet{ca: ca}
	if len(ss) > 0 && ca == nil {
		return nil, errors.New("secrets need the sandbox's CA")
	}
	for i, s := range ss {
		switch {
		case s.Name == "":
			return nil, fmt.Errorf("secret %d has no name", i)
		case len(s.Placeholder) < minPlaceholder:
			return nil, fmt.Errorf("secret %s: a placeholder needs %d characters at least", s.Name, minPlaceholder)
		case s.Value == "":
			return nil, fmt.Errorf("secret %s has no value", s.Name)
		case strings.ContainsAny(s.Value, "\r\n\x00"), strings.ContainsAny(s.Placeholder, "\r\n\x00"):
			// A header value with a line break would be a second header.
			return nil, fmt.Errorf("secret %s: its value or placeholder holds a line break or NUL", s.Name)
		case len(s.Hosts) == 0:
			return nil, fmt.Errorf("secret %s names no host", s.Name)
		}
		c := compiledSecret{Secret: s}
		for _, h := range s.Hosts {
			host, err := spec.ParseHost(h)
			if err != nil {
				return nil, fmt.Errorf("secret %s: %v", s.Name, err)
			}
			c.hosts = append(c.hosts, rule{Host: host, text: h})
		}
		for _, o := range set.list {
			if strings.Contains(o.Placeholder, s.Placeholder) || strings.Contains(s.Placeholder, o.Placeholder) {
				return nil, fmt.Errorf("secrets %s and %s: one placeholder holds the other", o.Name, s.Name)
			}
		}
		set.list = append(set.list, c)
	}
	return set, nil
}

// terminates reports whether the proxy adds a secret to requests for d,
// and so terminates the sandbox's TLS to it.
func (s *secretSet) terminates(d dest) bool {
	if s == nil {
		return false
	}
	for _, c := range s.list {
		if c.isFor(d) {
			return true
		}
	}
	return false
}

func (c compiledSecret) isFor(d dest) bool {
	for _, r := range c.hosts {
		if r.matches(d) {
			return true
		}
	}
	return false
}

// refusePlain refuses a plain-HTTP request that carries any placeholder:
// a secret is only ever added over TLS the proxy terminated.
func (s *secretSet) refusePlain(req *http.Request) error {
	if s == nil {
		return nil
	}
	texts := []string{req.RequestURI}
	for _, vs := range req.Header {
		for _, v := range vs {
			texts = append(texts, v)
			if raw, ok := basicCredentials(v); ok {
				texts = append(texts, raw)
			}
		}
	}
	for _, c := range s.list {
		for _, t := range texts {
			if strings.Contains(t, c.Placeholder) {
				return &MisdirectedError{Secret: c.Name}
			}
		}
	}
	return nil
}

// basicCredentials decodes an Authorization value of the Basic scheme.
func basicCredentials(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// MisdirectedError is a request that carries the placeholder of a secret
// to a host the secret is not for: the agent sending it where it does
// not belong.
type MisdirectedError struct{ Secret string }

func (e *MisdirectedError) Error() string {
	return fmt.Sprintf("the placeholder of secret %s is not for this host", e.Secret)
}

// rewrite replaces, in a request to d, each placeholder of a secret for d
// with its value: in every header value, and inside Basic credentials
// (git over HTTPS sends the token as the password). It returns the
// secrets it added, or a *MisdirectedError when the request carries a
// placeholder of a secret that is not for d (in a header or its target),
// and then changes nothing.
func (s *secretSet) rewrite(req *http.Request, d dest) ([]string, error) {
	if s == nil {
		return nil, nil
	}
	check := func(text string) error {
		for i := range s.list {
			if c := &s.list[i]; strings.Contains(text, c.Placeholder) && !c.isFor(d) {
				return &MisdirectedError{Secret: c.Name}
			}
		}
		return nil
	}
	if err := check(req.RequestURI); err != nil {
		return nil, err
	}
	for _, vs := range req.Header {
		for _, v := range vs {
			if err := check(v); err != nil {
				return nil, err
			}
			if raw, ok := basicCredentials(v); ok {
				if err := check(raw); err != nil {
					return nil, err
				}
			}
		}
	}
	var added []string
	// Only a secret for d is ever added, in one pass over the text
	// (strings.Replacer): a value put in is never searched again.
	replace := func(text string) string {
		var pairs []string
		for i := range s.list {
			c := &s.list[i]
			if !c.isFor(d) || !strings.Contains(text, c.Placeholder) {
				continue
			}
			pairs = append(pairs, c.Placeholder, c.Value)
			if !slices.Contains(added, c.Name) {
				added = append(added, c.Name)
			}
		}
		if len(pairs) == 0 {
			return text
		}
		return strings.NewReplacer(pairs...).Replace(text)
	}
	for k, vs := range req.Header {
		for i, v := range vs {
			if raw, ok := basicCredentials(v); ok {
				if r := replace(raw); r != raw {
					vs[i] = "Basic " + base64.StdEncoding.EncodeToString([]byte(r))
					continue
				}
			}
			vs[i] = replace(v)
		}
		req.Header[k] = vs
	}
	return added, nil
}
