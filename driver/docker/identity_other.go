//go:build !unix

package docker

import "io/fs"

// fileID has no portable identity to give off Unix: nothing is recorded
// and nothing checked.
func fileID(fs.FileInfo) (string, bool) { return "", false }
