//go:build !unix

package docker

import "io/fs"

// fileID has no portable identity to give off Unix: nothing is recorded
// and nothing checked.
func fileID(fs.FileInfo) (string, bool) { return "", false }

// ownerOf has no uid and gid to give off Unix: the sandbox runs as its
// template's user.
func ownerOf(string) (uid, gid int, ok bool) { return 0, 0, false }
