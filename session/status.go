package session

import (
	"fmt"
	"net"
	"strconv"

	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// StatusFormat is the format_version of `sbx status --json`
// (docs/status-json.md).
const StatusFormat = "1"

// StatusReport is the document `sbx status --json` prints.
type StatusReport struct {
	FormatVersion string   `json:"format_version"`
	Sandboxes     []Status `json:"sandboxes"`
	Errors        []string `json:"errors"`
}

// Status is one declared sandbox as `sbx status` reports it.
type Status struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	File   string `json:"file"`
	Exists bool   `json:"exists"`
	// Status is the backend's word for it: running, stopped, exited…
	Status string `json:"status,omitempty"`
	// State: in-sync, changes-pending, drifted, absent, unmanaged,
	// other-workspace (it belongs to another workspace or user; the
	// report's errors say whose).
	State   string           `json:"state"`
	Pending int              `json:"pending_changes"`
	Drift   []reconcile.Diff `json:"drift"`
	// Published are the host addresses of its published ports, as
	// HOST_IP:HOST_PORT->PORT/PROTOCOL (the host port the backend picked
	// where the file names none).
	Published []string `json:"published,omitempty"`
}

// Report is Status as the versioned document of `sbx status --json`.
func (s *Session) Report() StatusReport {
	rows, errs := s.Status()
	if rows == nil {
		rows = []Status{}
	}
	return StatusReport{FormatVersion: StatusFormat, Sandboxes: rows, Errors: errs}
}

// Status reports each declared sandbox, and the plan's errors.
func (s *Session) Status() ([]Status, []string) {
	p := reconcile.Plan(s.Desired, s.Live, s.Records, s.Backend.Caps(), reconcile.Options{DriverVersion: s.Version})
	byName := map[string]*reconcile.SandboxChange{}
	for _, c := range p.Sandboxes {
		byName[c.Sandbox] = c
	}
	var rows []Status
	for _, sp := range s.Specs {
		r := Status{Name: sp.Name, Driver: s.Backend.Name(), File: sp.Files[0], Drift: []reconcile.Diff{}}
		if l := s.Live[sp.Name]; l != nil && l.Exists {
			r.Exists, r.Status = true, l.Status
			r.Published = published(l.Ports)
		}
		c := byName[sp.Name]
		switch {
		case s.Foreign(sp) != nil:
			r.State = "other-workspace"
		case !r.Exists:
			r.State = "absent"
		case c == nil:
			r.State = "unmanaged"
		case len(c.Drift) > 0:
			r.State, r.Drift = "drifted", c.Drift
		case c.Action != reconcile.ActionNoOp:
			r.State = "changes-pending"
		default:
			r.State = "in-sync"
		}
		if c != nil {
			r.Pending = len(c.Changes)
		}
		rows = append(rows, r)
	}
	errs := p.Errors
	if errs == nil {
		errs = []string{}
	}
	return rows, errs
}

// published are live ports as Docker prints them (docker port, docker
// ps): a port published with no host IP in the file is on the host's
// loopback. A port whose host port is not known yet is left out.
func published(ps []spec.Port) []string {
	var out []string
	for _, p := range ps {
		if p.HostPort == 0 {
			continue
		}
		ip := p.HostIP
		if ip == "" {
			ip = "127.0.0.1"
		}
		out = append(out, fmt.Sprintf("%s->%d/%s", net.JoinHostPort(ip, strconv.Itoa(p.HostPort)), p.ContainerPort, p.Protocol))
	}
	return out
}
