// Package agenttest gives tests the real coding agents, Claude Code and
// Codex, pinned or at their newest releases, and a sandbox template image
// to run them in, built on this machine: no container registry is
// reachable in CI, and sbx's end-to-end tests must run the agents users
// run, in a template shaped like Docker's own sandbox templates (Debian, a
// non-root agent user). Only tests, and the CI's release check
// (./releases), import it.
//
// # What is pinned
//
// The native builds of @anthropic-ai/claude-code 2.1.332 (its linux-x64
// platform package: one glibc binary, claude) and @openai/codex 0.171.0
// (its linux-x64 platform package: static musl binaries under
// vendor/x86_64-unknown-linux-musl). Node.js is not needed: the npm
// wrappers only find and exec these binaries. Each tarball is checked
// against the registry's dist.integrity before it is unpacked (see
// pins.go), and unpacked by internal/tarball's confined extraction: an
// entry that would land outside its directory, a link out of it, a hard
// link or a device fails the fetch.
//
// # The newest releases (SBX_AGENT_RELEASES=latest)
//
// Users' templates install the agents' latest releases; the pins reach
// CI only when someone bumps them. With SBX_AGENT_RELEASES=latest (unset
// or "pinned": the pins) Open, and so Fetch and Template, use the newest
// releases instead, read from the npm registry over HTTPS (LatestPins):
// the version the latest dist-tag of @anthropic-ai/claude-code and of
// @openai/codex names; the linux-x64 package that version's
// optionalDependencies list (for Claude Code
// @anthropic-ai/claude-code-linux-x64 at the same version, for Codex the
// alias npm:@openai/codex@VERSION-linux-x64); and that package's
// dist.tarball and dist.integrity, against which the download is checked
// as a pin's is. The registry's answers are untrusted input: each is
// bounded (1 MiB) and parsed strictly (one JSON object, no duplicate
// names, the fields read of the right types); the packages must be the
// ones asked for, the versions plain semver (MAJOR.MINOR.PATCH), the
// platform package the one expected at the wrapper's version, and the
// tarball the registry's own URL for it. ClaudeVersion and CodexVersion
// stay the pins'; a cache's Pins say which releases it holds (Release).
// .ci/run runs every real-agent test a second time this way when the
// newest releases are not the pins.
//
// # What the image holds (Template)
//
// The first two items are the base, cached apart from the agents; the
// agents' files and their config follow it, each with its owner and mode.
//
//   - Debian bookworm, debootstrap's minbase variant plus bash, coreutils,
//     git, ca-certificates and procps; apt's caches, manuals, info pages,
//     translations and documentation other than copyright files removed.
//     The release is verified by debootstrap against the host's
//     debian-archive-keyring.
//   - A user agent (uid 1000, gid 1000, home /home/agent, shell /bin/bash),
//     made by useradd from /etc/skel.
//   - /usr/local/bin/claude: Claude Code's native binary, as the npm
//     package's postinstall leaves it (bin/claude.exe is that binary; it
//     runs with no wrapper and no extra environment).
//   - /opt/codex: Codex's vendor/x86_64-unknown-linux-musl directory as
//     the npm package ships it (bin/codex, bin/codex-code-mode-host,
//     codex-path/rg, codex-resources/…). Codex finds its helpers and rg
//     relative to its own executable's real path (codex doctor reports
//     /opt/codex as its package), so the layout is kept whole.
//     /usr/local/bin/codex is a sh script that does what the npm wrapper
//     bin/codex.js does before it execs the binary: it sets
//     CODEX_MANAGED_BY_NPM=1 and CODEX_MANAGED_PACKAGE_ROOT, and unsets
//     the other package managers' markers. /usr/local/bin/rg links to the
//     bundled ripgrep, for the agents' shell commands.
//   - /home/agent/.codex/config.toml and /root/.codex/config.toml point
//     Codex at the tests' mock model server, named model-api:
//     openai_base_url = "https://model-api:8443/v1". Each home belongs to
//     its user.
//   - Image config: USER agent, WORKDIR /home/agent, PATH, LANG=C.UTF-8
//     and CMD bash. HOME is not set in the image: Docker sets it from the
//     running user's passwd entry, so docker run -u 0 gets /root.
//     No ENTRYPOINT: sbx's docker driver runs its own init.
//
// # Cache layout
//
// Everything lives under ${SBX_AGENT_CACHE:-/var/cache/sbx-agents}:
//
//	locks/agents.lock        flock held by whoever fetches, builds or prunes
//	base-BASE/rootfs.tar     the Debian base: debootstrap, trimmed, the agent user
//	base-BASE/debootstrap.log  the last debootstrap's output
//	KEY/claude/package/      the unpacked Claude Code platform package
//	KEY/codex/package/       the unpacked Codex platform package
//	KEY/rootfs.tar           the image's whole filesystem, for docker import
//	latest                   the key of the newest releases last used
//	tmp-*, KEY/tmp-*, base-BASE/tmp-*  work in progress; a later run removes it
//
// BASE is the sha256 of the recipe's base part alone (baseKey: Debian
// and the agent user); KEY is the sha256 of the pins and the whole recipe
// (recipe.go), and the image is tagged sbx-agent-template:KEY[:12]. Only
// the base needs debootstrap and root: KEY/rootfs.tar is the base's tar,
// entry for entry, followed by the agents' files, written as one stream
// (compose) without unpacking either on the host. So a new release costs
// its download, that tar and a docker import, not a debootstrap. Work is
// written under a tmp- name and renamed into place, so a name that exists
// is complete; a killed run leaves only tmp- names, which the next holder
// of the lock removes. With rootfs.tar cached, a new Docker daemon needs
// only the import. A build removes the directories and the
// sbx-agent-template images (those no container uses) of keys other than
// its own, the pinned one's and the newest releases' last used (the file
// latest, written when such a cache takes the lock), and other bases.
package agenttest
