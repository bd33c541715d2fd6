package fakestate

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStoreRoundTrip(t *testing.T) {
	s := Store{Path: filepath.Join(t.TempDir(), "state.json")}
	if err := s.Update(func(st *State) error {
		st.Add(&Sandbox{Name: "b"})
		st.Add(&Sandbox{Name: "a", Workspaces: []Workspace{{Path: "/w", ReadOnly: true}}})
		st.Secrets = append(st.Secrets, Secret{Scope: "a", Name: "x", SHA256: Fingerprint("v")}, Secret{Name: "g"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(st *State) error { st.Remove("a"); return os.ErrInvalid }); err == nil {
		t.Fatal("error from fn not returned")
	}
	if err := s.View(func(st *State) error {
		var names []string
		for _, sb := range st.Sandboxes {
			names = append(names, sb.Name)
		}
		if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
			t.Errorf("sandboxes (failed update must not be saved) (-want +got):\n%s", diff)
		}
		st.Remove("a")
		if diff := cmp.Diff([]Secret{{Name: "g"}}, st.Secrets); diff != "" {
			t.Errorf("Remove keeps scoped secrets (-want +got):\n%s", diff)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentUpdates(t *testing.T) {
	s := Store{Path: filepath.Join(t.TempDir(), "state.json")}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Update(func(st *State) error { st.Calls["x"]++; return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := s.View(func(st *State) error {
		if st.Calls["x"] != 20 {
			t.Errorf("calls = %d, want 20", st.Calls["x"])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestIDs(t *testing.T) {
	u := UUID("api", 1)
	if len(u) != 36 || strings.Count(u, "-") != 4 || u[14] != '4' || u == UUID("api", 2) {
		t.Errorf("UUID = %s", u)
	}
	if len(HexID("api", 1)) != 64 {
		t.Error("HexID length")
	}
}
