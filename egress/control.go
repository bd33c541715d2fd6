package egress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The proxy's control channel: JSON lines in (the proxy container's
// standard input, which the docker driver reaches by attaching to it),
// one JSON line out per request (its standard output; decisions go to
// standard error). Only holders of the Docker API can attach; the sandbox
// cannot.

// ControlRequest asks the proxy for the policy in force ("policy"), to
// put a new one in force ("set", with Policy), or to add secrets to the
// requests for their hosts ("secrets", with CA, Secrets and optionally
// Roots, replacing those it had; held in memory only, so sbx sends them
// again whenever the proxy may have restarted).
type ControlRequest struct {
	ID     string          `json:"id"`
	Op     string          `json:"op"`
	Policy json.RawMessage `json:"policy,omitempty"`
	// CA is the sandbox's CA, certificate and key (CA.MarshalPEM).
	CA      []byte   `json:"ca,omitempty"`
	Secrets []Secret `json:"secrets,omitempty"`
	// Roots, with "secrets", is the CA bundle (PEM) the proxy verifies
	// the upstreams of the tunnels it terminates with, in place of its
	// own (Options.UpstreamRoots, else the system's): what the host sbx
	// runs on trusts, for a proxy whose image has no roots of its own
	// (the kubernetes driver's runs sbx's helper image, FROM scratch).
	Roots []byte `json:"roots,omitempty"`
}

// ControlReply answers a request with the same ID: the policy in force
// after it, or why it failed (then nothing changed).
type ControlReply struct {
	ID     string  `json:"reply"`
	Policy *Policy `json:"policy,omitempty"`
	// AlwaysBlocked, beside a policy, lists the ranges the proxy refuses
	// whatever the policy says: unspecified and loopback addresses, and
	// the addresses and gateways of its own network namespace. It is
	// what the proxy found, not part of the declaration.
	AlwaysBlocked []string `json:"alwaysBlocked,omitempty"`
	// Secrets names the secrets the proxy adds, after a "secrets"
	// request; never their values.
	Secrets []string `json:"secrets,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// maxControlLine bounds one request (a policy with thousands of hosts
// fits easily).
const maxControlLine = 4 << 20

// ServeControl answers requests from r on w until r ends.
func (p *Proxy) ServeControl(r io.Reader, w io.Writer) error {
	reply := func(rep ControlReply) {
		b, _ := json.Marshal(rep)
		w.Write(append(b, '\n'))
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxControlLine)
		if errors.Is(err, errLineTooLong) {
			reply(ControlReply{Error: fmt.Sprintf("control request over %d bytes", maxControlLine)})
			continue
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req ControlRequest
		if err := json.Unmarshal(line, &req); err != nil {
			reply(ControlReply{Error: "malformed control request: " + err.Error()})
			continue
		}
		switch req.Op {
		case "policy":
		case "set":
			if err := p.Set(req.Policy); err != nil {
				reply(ControlReply{ID: req.ID, Error: err.Error()})
				continue
			}
		case "secrets":
			names, err := p.setSecretsPEM(req.CA, req.Roots, req.Secrets)
			if err != nil {
				reply(ControlReply{ID: req.ID, Error: err.Error()})
				continue
			}
			reply(ControlReply{ID: req.ID, Secrets: names})
			continue
		default:
			reply(ControlReply{ID: req.ID, Error: fmt.Sprintf("unknown control op %q", req.Op)})
			continue
		}
		pol := p.Policy()
		reply(ControlReply{ID: req.ID, Policy: &pol, AlwaysBlocked: p.AlwaysBlocked()})
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline; a line over max
// bytes is skipped whole and reported as errLineTooLong. A last line with
// no newline counts.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && (len(line) > 0 || tooLong):
		case err != nil:
			return nil, err
		}
		if tooLong {
			return nil, errLineTooLong
		}
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
}
