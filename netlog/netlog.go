// Package netlog is the vocabulary of a sandbox's network log that the
// egress proxy writes, every driver reads from its backend, and the loop
// and the CLI show: entries, denials and their counts in sbx's terms, the
// same on every backend. It imports nothing of sbx, so that the proxy and
// the drivers can both depend on it and not on each other.
package netlog

import "time"

// Entry is one entry of a sandbox's network log in sbx's terms, the
// same on every backend: `sbx netlog --json` prints these
// (docs/netlog-json.md). Host, Method, Reason and Rule can hold what the
// agent asked for: untrusted text.
type Entry struct {
	// Time is the backend's timestamp, as it writes it (RFC 3339 on the
	// docker driver); for an aggregate entry, when it was last seen.
	Time   string `json:"time"`
	Method string `json:"method,omitempty"`
	Host   string `json:"host"`
	Port   int    `json:"port,omitempty"`
	// Decision is allow, deny or error (the request could not be served:
	// a name that does not resolve, a refused dial).
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	Rule     string `json:"rule,omitempty"`
	// Status is the HTTP status the proxy answered with, where its log
	// says (sbx's own proxy: 403 for a denial, 431 for a header too
	// large, ...).
	Status int `json:"status,omitempty"`
	// Count and Since are set where the backend aggregates requests to a
	// host (Docker's sbx): how many since when.
	Count int    `json:"count,omitempty"`
	Since string `json:"since,omitempty"`
}

// Count is what a count of the requests egress denied, and of those that
// failed upstream, found in a window (driver.EgressCounter).
type Count struct {
	Denied, Failed           int
	FirstDenied, FirstFailed []Denial
}

// Add counts one request (Decision "error" failed, any other was
// denied), keeping the first max of each kind.
func (c *Count) Add(d Denial, max int) {
	if d.Decision == "error" {
		if c.Failed++; len(c.FirstFailed) < max {
			c.FirstFailed = append(c.FirstFailed, d)
		}
		return
	}
	if c.Denied++; len(c.FirstDenied) < max {
		c.FirstDenied = append(c.FirstDenied, d)
	}
}

// Denial is one request egress denied, or that failed upstream
// (Decision). Every text in it is what the agent asked for or derived
// from it: bound it before keeping it and escape it before showing it
// (untrusted.Text).
type Denial struct {
	Time time.Time `json:"time"`
	// Decision is deny, or error for a request that failed upstream.
	Decision string `json:"decision,omitempty"`
	Method   string `json:"method,omitempty"`
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Reason   string `json:"reason"`
	Rule     string `json:"rule,omitempty"`
}
