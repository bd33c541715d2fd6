package gitdir

import "strings"

// Copyable reports whether an entry at name (a slash-separated path
// relative to a workspace; dir says whether it is a directory) may be
// copied from a sandbox's copy of the workspace into the host's as far as
// git is concerned. Of a .git directory at any depth only git's data is
// copyable: objects (but not objects/info, where alternates name other
// object stores), refs, logs, HEAD, ORIG_HEAD, index and packed-refs
// (gitrepository-layout(5)). Everything else in it is git's configuration
// surface or may become it — config, config.worktree, commondir, hooks/,
// info/, worktrees/, modules/ (each submodule's config and hooks),
// remotes/, branches/ — and git on the host would read it, so running
// git there would run what the agent wrote (core.fsmonitor, a hook). A
// .git that is not a directory (a "gitdir:" file or a symlink pointing
// elsewhere) is never copyable. Names are compared as a case-insensitive
// file system sees them (".GIT/Config", ".git./config" on Windows).
func Copyable(name string, dir bool) bool {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if fold(p) != ".git" {
			continue
		}
		rest := parts[i+1:]
		if len(rest) == 0 {
			return dir
		}
		switch fold(rest[0]) {
		case "head", "orig_head", "index", "packed-refs":
			return len(rest) == 1 && !dir
		case "objects":
			return len(rest) == 1 || fold(rest[1]) != "info"
		case "refs", "logs":
			return true
		}
		return false
	}
	return true
}

// Fold is a path as a case-insensitive file system (macOS, Windows) sees
// it: each element lower-cased, trailing dots and spaces dropped as
// Windows drops them.
func Fold(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = fold(p)
	}
	return strings.Join(parts, "/")
}

// fold is a path element as a case-insensitive file system (macOS,
// Windows) sees it; Windows also drops trailing dots and spaces.
func fold(s string) string {
	return strings.TrimRight(strings.ToLower(s), ". ")
}
