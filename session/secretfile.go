package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sbxhq/sbx/spec"
)

// credential is one credential of a file secret: where it is in the
// document (a dotted path of keys and indexes), its value, and what the
// sandbox's copy holds instead.
type credential struct {
	Key, Value, Placeholder string
}

// minCredential is the shortest string of a file secret taken for a
// credential: shorter ones are names, flags and ids.
const minCredential = 16

// keyPrefixes are, with the agents' own (spec.Agent.KeyPrefix), the
// public prefixes of well-known keys and tokens (OpenAI's, GitHub's),
// kept on a placeholder so that a client that checks a key's shape
// accepts it. Only these: any other start of a value is part of the
// secret.
var keyPrefixes = []string{"sk-", "rt_", "github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"}

// keyPrefix is the longest known prefix value starts with.
func keyPrefix(value string) string {
	best := ""
	known := slices.Clone(keyPrefixes)
	for _, a := range spec.Agents {
		if p := spec.AgentOf(a).KeyPrefix; p != "" {
			known = append(known, p)
		}
	}
	for _, p := range known {
		if strings.HasPrefix(value, p) && len(p) > len(best) {
			best = p
		}
	}
	return best
}

// fileCredentials replaces, in a JSON document (encoding/json reads and
// writes it), every credential with a placeholder from placeholder(key,
// prefix): each string of minCredential characters or more that is not a
// timestamp; of a JWT, only the signature, so that a client can still
// read the token's claims, which prove nothing without it. It returns the
// sandbox's copy and the credentials, in document order of their keys.
func fileCredentials(data []byte, placeholder func(key, prefix string) string) ([]byte, []credential, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("not one JSON document")
	}
	var creds []credential
	var walk func(v any, key string) any
	walk = func(v any, key string) any {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				x[k] = walk(x[k], joinKey(key, k))
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i], joinKey(key, fmt.Sprint(i)))
			}
		case string:
			if len(x) < minCredential || isTimestamp(x) {
				return x
			}
			if head, sig, ok := jwtParts(x); ok {
				if len(sig) < minCredential {
					return x
				}
				ph := placeholder(key+"#signature", "")
				creds = append(creds, credential{Key: key + "#signature", Value: sig, Placeholder: ph})
				return head + "." + ph
			}
			ph := placeholder(key, keyPrefix(x))
			creds = append(creds, credential{Key: key, Value: x, Placeholder: ph})
			return ph
		}
		return v
	}
	doc = walk(doc, "")
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(out, '\n'), creds, nil
}

func joinKey(base, k string) string {
	if base == "" {
		return k
	}
	return base + "." + k
}

func isTimestamp(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// jwtParts splits a JWT (three base64url parts, the first a JSON header
// naming its algorithm) into its signed part and its signature.
func jwtParts(s string) (head, sig string, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return "", "", false
	}
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return "", "", false
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(h, &hdr) != nil || hdr.Alg == "" {
		return "", "", false
	}
	return parts[0] + "." + parts[1], parts[2], true
}
