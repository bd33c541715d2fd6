//go:build unix && !linux

package loop

// becomeSubreaper does nothing off Linux: the helper runs inside a Linux
// sandbox, and elsewhere only the process group is ended.
func becomeSubreaper() error { return nil }
