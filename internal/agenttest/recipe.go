package agenttest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// recipeVersion is part of the cache key: bump it when the build changes
// the image in a way the recipe's values below do not show. baseVersion
// is part of the base's key: bump it too when the change is in the base
// (the Debian system and the agent user, not the agents).
const (
	recipeVersion = 1
	baseVersion   = 1
)

// The recipe of the template image.
const (
	suite         = "bookworm"
	variant       = "minbase"
	includes      = "ca-certificates,git,procps"
	defaultMirror = "http://deb.debian.org/debian"
	// keyring is passed to debootstrap explicitly: without it a host
	// that lacks the keyring would get an unverified system.
	keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	// sourcesList is the image's apt source whatever mirror built it.
	sourcesList = "deb http://deb.debian.org/debian bookworm main\n"

	agentUser = "agent"
	agentID   = 1000
	agentHome = "/home/agent"
	codexDir  = "/opt/codex"

	// codexConfig points Codex at the tests' mock model server.
	codexConfig = "openai_base_url = \"https://model-api:8443/v1\"\n"

	// codexWrapper does what @openai/codex 0.171.0's bin/codex.js does
	// before it execs the native binary: it marks the launch as npm's
	// (CODEX_MANAGED_BY_NPM, with the package root codex doctor checks
	// for) after clearing the other package managers' markers. codex.js
	// adds nothing to PATH; the binary finds codex-path/rg and its
	// helpers next to its own real path.
	codexWrapper = `#!/bin/sh
unset CODEX_MANAGED_BY_BUN CODEX_MANAGED_BY_PNPM CODEX_MANAGED_BY_VITE_PLUS
CODEX_MANAGED_BY_NPM=1
CODEX_MANAGED_PACKAGE_ROOT=` + codexDir + `
export CODEX_MANAGED_BY_NPM CODEX_MANAGED_PACKAGE_ROOT
exec ` + codexDir + `/bin/codex "$@"
`

	imageRepo = "sbx-agent-template"
	imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// imageChanges are docker import's --change instructions: the image
// config. HOME is left to Docker, which sets it from the user's passwd
// entry when the image does not.
func imageChanges() []string {
	return []string{
		"USER " + agentUser,
		"WORKDIR " + agentHome,
		"ENV PATH=" + imagePath,
		"ENV LANG=C.UTF-8",
		`CMD ["/bin/bash"]`,
	}
}

// key names a cache entry and an image: the sha256 of the pins and
// everything the recipe says, the base's part included.
func key(p Pins) string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %d\nsuite %s\nvariant %s\ninclude %s\nsources %q\n", recipeVersion, suite, variant, includes, sourcesList)
	fmt.Fprintf(h, "user %s %d %s\ncodex %s\nconfig %q\nwrapper %q\n", agentUser, agentID, agentHome, codexDir, codexConfig, codexWrapper)
	for _, pin := range p.all() {
		fmt.Fprintf(h, "pin %q %q %q %q %q %q\n", pin.Name, pin.Version, pin.Tarball, pin.Integrity, pin.Dir, pin.Want)
	}
	for _, c := range imageChanges() {
		fmt.Fprintf(h, "change %q\n", c)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// baseKey names the base's cache entry: the sha256 of what the recipe
// says of the Debian system and the agent user, nothing of the agents, so
// that new agent releases reuse it.
func baseKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "base %d\nsuite %s\nvariant %s\ninclude %s\nsources %q\n", baseVersion, suite, variant, includes, sourcesList)
	fmt.Fprintf(h, "user %s %d %s\n", agentUser, agentID, agentHome)
	return hex.EncodeToString(h.Sum(nil))
}
