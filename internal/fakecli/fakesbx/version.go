package fakesbx

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
)

// commit is the build commit printed next to the version: the one recorded
// for v0.39.0 (docker-sandboxes-cli.md §2.10), else derived from the
// version.
func commit(v string) string {
	if v == "0.39.0" {
		return "def8cb0523a77e757bdd6ef52b459fe374f3783e"
	}
	h := sha1.Sum([]byte("sbx " + v))
	return hex.EncodeToString(h[:])
}

func (a *app) versionCmd(args []string) error {
	fs := newFlags("version")
	jsonOut := false
	if a.version.AtLeast("0.42.0") {
		fs.BoolVar(&jsonOut, "json", false, "Output in JSON format")
	}
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	v := a.version.String()
	if jsonOut {
		// Format: docker-sandboxes-cli.md §1.3 "Others" / §7 0.42.0: only
		// server.state (running|unavailable) is documented; the other
		// field names are UNCONFIRMED.
		state := a.getenv("FAKE_SBX_SERVER_STATE")
		if state == "" {
			state = "running"
		}
		server := map[string]string{"state": state}
		if state == "running" {
			server["version"] = "v" + v
		}
		return a.json(map[string]any{
			"client": map[string]string{"version": "v" + v, "commit": commit(v)},
			"server": server,
		})
	}
	// Format: docker-sandboxes-cli.md §2.10 ([3P] `v0.39.0 def8cb05...`),
	// single line since 0.32.0 (§7).
	fmt.Fprintf(a.stdout, "v%s %s\n", v, commit(v))
	return nil
}
