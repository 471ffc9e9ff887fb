package services

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// StateFileName is the file in the data directory that keeps each
// service's install state and auto-start flag across gateway restarts.
const StateFileName = "services-state.json"

type stateFile struct {
	Version  int                     `json:"version"`
	Services map[string]serviceState `json:"services"`
}

type serviceState struct {
	Installed *bool     `json:"installed,omitempty"`
	AutoStart *bool     `json:"autoStart,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// stateStore is the persisted part of every supervisor's state. Each
// supervisor actor owns its own entry; the store only serialises writes
// of the whole (small) file, which happen on operator actions, never on a
// request path.
type stateStore struct {
	mu   sync.Mutex
	path string
	data stateFile
}

// loadState reads dir/StateFileName; a missing file is an empty state. A
// file that cannot be parsed stops start-up rather than being overwritten:
// it may hold an operator's choices.
func loadState(dir string) (*stateStore, error) {
	s := &stateStore{path: filepath.Join(dir, StateFileName), data: stateFile{Version: 1, Services: map[string]serviceState{}}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the services state file %s: %w", s.path, err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("the services state file %s is not valid JSON (%v); fix it or delete it to reset install and auto-start choices", s.path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("the services state file %s has version %d; this gateway reads version 1", s.path, f.Version)
	}
	if f.Services == nil {
		f.Services = map[string]serviceState{}
	}
	s.data = f
	return s, nil
}

func (s *stateStore) get(name string) serviceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data.Services[name]
}

// update changes one entry and rewrites the file atomically: a temporary
// file in the same directory, fsync, rename, fsync of the directory. On a
// write failure the in-memory state is left unchanged.
func (s *stateStore) update(name string, now time.Time, fn func(*serviceState)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.data.Services[name]
	fn(&st)
	st.UpdatedAt = now.UTC()
	next := stateFile{Version: 1, Services: make(map[string]serviceState, len(s.data.Services)+1)}
	for k, v := range s.data.Services {
		next.Services[k] = v
	}
	next.Services[name] = st
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.path, append(b, '\n')); err != nil {
		return fmt.Errorf("cannot save the services state file: %w", err)
	}
	s.data = next
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".services-state-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
