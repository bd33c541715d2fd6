package gitdir

import "testing"

// TestCopyable plays the hostile agent's pull: every name through which
// git on the host would take configuration from the agent's copy is
// refused, whatever its case or depth; the repository's data passes.
func TestCopyable(t *testing.T) {
	for _, tt := range []struct {
		name string
		dir  bool
		want bool
	}{
		{"src/main.go", false, true},
		{".gitignore", false, true},
		{".gitmodules", false, true},
		{".git", true, true},
		{".git/HEAD", false, true},
		{".git/index", false, true},
		{".git/packed-refs", false, true},
		{".git/ORIG_HEAD", false, true},
		{".git/objects", true, true},
		{".git/objects/ab/cdef", false, true},
		{".git/objects/pack/pack-1.pack", false, true},
		{".git/refs/heads/main", false, true},
		{".git/refs/heads/config", false, true},
		{".git/logs/HEAD", false, true},
		{"sub/.git", true, true},
		{"sub/.git/refs/heads/main", false, true},
		// The configuration surface (THREATS.md #3a).
		{".git", false, false},
		{"sub/.git", false, false},
		{".git/config", false, false},
		{".git/config.worktree", false, false},
		{".git/commondir", false, false},
		{".git/hooks", true, false},
		{".git/hooks/post-checkout", false, false},
		{".git/info", true, false},
		{".git/info/attributes", false, false},
		{".git/info/exclude", false, false},
		{".git/worktrees/w/config.worktree", false, false},
		{".git/worktrees/w/commondir", false, false},
		{".git/modules/m/config", false, false},
		{".git/modules/refs/config", false, false},
		{".git/modules/m/hooks/pre-commit", false, false},
		{".git/remotes/origin", false, false},
		{".git/branches/b", false, false},
		{".git/objects/info/alternates", false, false},
		{".git/objects/info", true, false},
		{".git/HEAD/config", false, false},
		{".git/description", false, false},
		{"vendor/lib/.git/config", false, false},
		{"vendor/lib/.git/hooks/pre-commit", false, false},
		// What a case-insensitive file system takes for the same names.
		{".GIT/Config", false, false},
		{".Git/HOOKS/post-checkout", false, false},
		{".git./config", false, false},
		{".git /commondir", false, false},
		{".GIT", false, false},
	} {
		if got := Copyable(tt.name, tt.dir); got != tt.want {
			t.Errorf("Copyable(%q, dir=%v) = %v, want %v", tt.name, tt.dir, got, tt.want)
		}
	}
}
