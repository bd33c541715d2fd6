package docker

import "testing"

// TestWithUser: a uid with a passwd entry is left as the image has it;
// one without gets a line named sbx (or sbx-UID when sbx is taken), with
// /home/sbx; a file without a final newline gets one first.
func TestWithUser(t *testing.T) {
	for _, c := range []struct {
		passwd   string
		uid, gid int
		want     string
		add      bool
	}{
		{"root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/bash\n", 1000, 1000, "", false},
		{"", 1000, 1001, "sbx:x:1000:1001:sbx agent:/home/sbx:/bin/sh\n", true},
		{"root:x:0:0:root:/root:/bin/sh", 4242, 4243, "root:x:0:0:root:/root:/bin/sh\nsbx:x:4242:4243:sbx agent:/home/sbx:/bin/sh\n", true},
		{"sbx:x:999:999::/nonexistent:/bin/false\n# 1000\nbroken\n", 1000, 1000, "sbx:x:999:999::/nonexistent:/bin/false\n# 1000\nbroken\nsbx-1000:x:1000:1000:sbx agent:/home/sbx:/bin/sh\n", true},
		// A name or a gid field that happens to read 1000 is not the uid.
		{"1000:x:7:1000::/:/bin/sh\n", 1000, 1000, "1000:x:7:1000::/:/bin/sh\nsbx:x:1000:1000:sbx agent:/home/sbx:/bin/sh\n", true},
	} {
		got, add := withUser([]byte(c.passwd), c.uid, c.gid)
		if add != c.add || (add && string(got) != c.want) || (!add && string(got) != c.passwd) {
			t.Errorf("withUser(%q, %d, %d) = %q, %v; want %q, %v", c.passwd, c.uid, c.gid, got, add, c.want, c.add)
		}
	}
}

func TestRootUser(t *testing.T) {
	for u, want := range map[string]bool{"": true, "root": true, "0": true, "0:0": true, "root:wheel": true, "1000": false, "agent": false, "1000:0": false, "node:root": false} {
		if got := rootUser(u); got != want {
			t.Errorf("rootUser(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestNumericUser(t *testing.T) {
	for _, c := range []struct {
		u        string
		uid, gid int
		ok       bool
	}{
		{"1000", 1000, 1000, true},
		{"1000:1001", 1000, 1001, true},
		{"0", 0, 0, true},
		{"agent", 0, 0, false},
		{"1000:staff", 0, 0, false},
		{"-1", 0, 0, false},
		{"", 0, 0, false},
	} {
		uid, gid, ok := numericUser(c.u)
		if uid != c.uid || gid != c.gid || ok != c.ok {
			t.Errorf("numericUser(%q) = %d, %d, %v; want %d, %d, %v", c.u, uid, gid, ok, c.uid, c.gid, c.ok)
		}
	}
}
