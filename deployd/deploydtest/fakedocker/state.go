package fakedocker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// fakeState is what the fake remembers between invocations, in the state file; the
// fields Status shows (PSCalls is its Reads) mean what they mean there.
type fakeState struct {
	Up       bool     `json:"up"`
	Project  string   `json:"project,omitempty"`
	Dir      string   `json:"dir,omitempty"`
	Services []string `json:"services,omitempty"`
	// Healthchecks are the services among them that declare a healthcheck.
	Healthchecks []string       `json:"healthchecks,omitempty"`
	Generation   int            `json:"generation"`
	PSCalls      int            `json:"ps_calls"`
	Calls        map[string]int `json:"calls,omitempty"`
	DownVolumes  bool           `json:"down_volumes"`
	// UpAt is when the last up ran, in Unix seconds.
	UpAt int64 `json:"up_at,omitempty"`
	// ServiceImages maps each service of the compose files of the last up to its image
	// reference: the service's image, or "<project>-<service>" for one that is built.
	ServiceImages map[string]string `json:"service_images,omitempty"`
	// Images are the images the fake engine holds: learned from every up, kept after
	// down and after an up of another release, until DELETE /images/{id} removes them.
	Images []heldImage `json:"images,omitempty"`
	// Starts records, per service, when its container was last started (stepTo).
	// Cleared by up.
	Starts map[string]started `json:"starts,omitempty"`
}

// started is when a container was last started, as fakeState.Starts records it.
type started struct {
	// RestartCount is the restart count it was seen with.
	RestartCount int `json:"restart_count"`
	// At is when the count changed, in Unix nanoseconds; 0 when it has not changed
	// since the up.
	At int64 `json:"at,omitempty"`
}

// heldImage is one image the fake engine holds.
type heldImage struct {
	// ID is "sha256:" and the hex sha256 of Ref, deterministic.
	ID string `json:"id"`
	// Ref is the normalized reference ("nginx" becomes "nginx:latest").
	Ref string `json:"ref"`
	// Size is the image size in bytes (Service.ImageSize, default defaultImageSize).
	Size int64 `json:"size"`
	// Created is when the first up that used it ran, in Unix seconds.
	Created int64 `json:"created"`
}

// readStatus reads a state file. A missing file is the zero fakeState.
func readStatus(path string) (fakeState, error) { return readJSON[fakeState](path, "state file ") }

// readJSON reads the JSON file path into a T. A missing file is the zero T; one that
// does not decode is an error naming it (what, e.g. "state file ", then path).
func readJSON[T any](path, what string) (T, error) {
	var v T
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%s%s: %w", what, path, err)
	}
	return v, nil
}

// writeJSON replaces the file path with v as indented JSON and mode perm, atomically
// (a temporary file, then rename). Unlike internal/fsutil.WriteFileAtomic it does not
// sync: the fake writes its state on every call, and a crash loses nothing of worth.
func writeJSON(path string, v any, perm os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	// Cleans up after a failure; after the rename there is nothing left to remove.
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close() // the write error is the one to report; the file is removed
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close() // the chmod error is the one to report; the file is removed
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// lockedStatus runs fn on the state under an exclusive lock, and saves what fn leaves
// when save is true. With no path the state is fresh() and lives only for this call.
func lockedStatus(path string, fresh func() fakeState, save bool, fn func(*fakeState) error) error {
	if path == "" {
		st := fresh()
		return fn(&st)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return fmt.Errorf("lock state: %w", err)
	}
	defer unlock()
	st, err := readStatus(path)
	if err != nil {
		return err
	}
	if err := fn(&st); err != nil || !save {
		return err
	}
	return writeJSON(path, st, 0o600)
}
