package fakestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Store is the state file at Path. Every access takes an exclusive lock on
// Path+".lock" for the whole read-modify-write.
type Store struct {
	Path string
}

// Update locks the store, loads the state (a missing or empty file is an
// empty state), calls fn and, when fn returns nil, writes the state back
// atomically. An error from fn leaves the file unchanged.
func (s Store) Update(fn func(*State) error) error {
	return s.locked(func() error {
		st, err := s.load()
		if err != nil {
			return err
		}
		if err := fn(st); err != nil {
			return err
		}
		return s.save(st)
	})
}

// View locks the store, loads the state and calls fn without writing.
func (s Store) View(fn func(*State) error) error {
	return s.locked(func() error {
		st, err := s.load()
		if err != nil {
			return err
		}
		return fn(st)
	})
}

func (s Store) locked(fn func() error) error {
	if s.Path == "" {
		return errors.New("state file path is empty")
	}
	f, err := os.OpenFile(s.Path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open state lock: %w", err)
	}
	defer f.Close()
	if err := lock(f); err != nil {
		return fmt.Errorf("lock state: %w", err)
	}
	defer unlock(f)
	return fn()
}

func (s Store) load() (*State, error) {
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(b) == 0) {
		return New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	st := New()
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("parse state %s: %w", s.Path, err)
	}
	st.normalize()
	return st, nil
}

func (s Store) save(st *State) error {
	st.normalize()
	st.Schema = SchemaVersion
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), filepath.Base(s.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}
