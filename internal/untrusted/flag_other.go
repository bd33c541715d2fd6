//go:build !unix

package untrusted

// nonblock is 0 where the filesystem has no FIFOs to block on (Windows'
// named pipes live in their own namespace, not in directories).
const nonblock = 0
