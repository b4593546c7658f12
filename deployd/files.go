package deployd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// ReadState reads the state file of cfg without taking the lock and without touching
// the network. A missing file is an empty State. A file that cannot be read is an error
// matching ErrStateUnreadable; a file that reads but does not parse is an error
// matching ErrStateCorrupt; a path that is not a regular file (a fifo, a directory) is
// an error matching fsutil.ErrNotRegular, returned at once.
func ReadState(cfg Config) (State, error) { return readStateFile(cfg.StatePath(), cfg.EnvID) }

// ReadToken reads the OpenBao token file of cfg without the network, as the tick
// does: a missing file is the zero Value; a file that holds no possible token is an
// error matching ErrTokenCorrupt; a path that is not a regular file is an error
// matching fsutil.ErrNotRegular. The caller registers the token with its redactor
// before anything that could carry it is printed.
func ReadToken(cfg Config) (secret.Value, error) {
	tok, err := readTokenFile(cfg.TokenPath())
	if err != nil {
		return secret.Value{}, err
	}
	return secret.New(tok), nil
}

var (
	// ErrStateUnreadable: state.json exists but cannot be read (EACCES, EIO, a mount
	// gone). The run ends on STATE_UNAVAILABLE (exit 1: a person must look) and
	// leaves the file as it is, so that its latch and its memory of failed shas
	// survive.
	ErrStateUnreadable = codes.StateUnavailable.Sentinel("state file cannot be read")
	// ErrStateCorrupt: state.json reads but does not parse. The tick moves it aside
	// and rebuilds the state from the live release.
	ErrStateCorrupt = codes.StateUnavailable.Sentinel("state file is corrupt")
	// ErrTokenCorrupt: bao.token holds what no OpenBao token is (NULs, bytes that are
	// not printable ASCII, nothing, too much): what a crash or a disk can leave. It is
	// never sent; the agent treats it like an invalid token.
	ErrTokenCorrupt = codes.Unauthenticated.Sentinel("the OpenBao token file is corrupt")
)

// maxStateFile bounds state.json; a larger file is corrupt.
const maxStateFile = 16 << 20

// maxTokenFile bounds bao.token; a larger file is corrupt. OpenBao's tokens are a few
// hundred bytes at most.
const maxTokenFile = 4096

// readStateFile reads the state file at path (of the box serving envID) without taking the
// lock and without touching the network. A missing file is an empty State. A file that cannot be read is an error
// matching ErrStateUnreadable; a file that reads but does not parse (or is larger than
// maxStateFile) is an error matching ErrStateCorrupt; a path that is not a regular
// file (a fifo, a directory) is an error matching fsutil.ErrNotRegular, at once.
func readStateFile(path, envID string) (State, error) {
	data, err := fsutil.ReadRegular(path, maxStateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return State{Schema: stateSchema, EnvID: envID}, nil
	case errors.Is(err, fsutil.ErrNotRegular):
		// No state is in it, and waiting does not make it a file: not a 75.
		return State{}, fmt.Errorf("read state: %w: remove it; the next run rebuilds the state from the live release", err)
	case errors.Is(err, fsutil.ErrTooLarge):
		return State{}, &corruptError{path: path, err: fmt.Errorf("larger than %d bytes", maxStateFile)}
	case err != nil:
		return State{}, fmt.Errorf("read state %s: %w: %w", path, ErrStateUnreadable, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, &corruptError{path: path, err: err}
	}
	return st, nil
}

// corruptError is a state.json that reads but does not parse; it matches
// ErrStateCorrupt.
type corruptError struct {
	path string
	err  error
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("state %s is corrupt (%v): the next run moves it aside and rebuilds it from the live release", e.path, e.err)
}

func (e *corruptError) Unwrap() []error { return []error{ErrStateCorrupt, e.err} }

// saveStateFile writes st to path atomically with mode 0600, for the box serving envID,
// through redact (which replaces every secret value the caller knows). What must
// survive a state.json that does not parse (keptState) goes first to keepPath, when
// it changed, so that one bad write of either file never loses it.
func saveStateFile(path, keepPath, envID string, st *State, redact func([]byte) []byte) error {
	st.Schema = stateSchema
	st.EnvID = envID
	if err := saveKept(keepPath, st, redact); err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	data = redact(append(data, '\n'))
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("write state %s: %w", path, err)
	}
	return nil
}

// keptState is what of the state must survive a state.json that does not parse,
// kept in a file of its own (Config.KeepPath): the replay ratchet, the memory of
// failed shas and the env-mismatch latch. Without it a corrupt state.json would let
// an older signed serial apply again, spend leases on shas that failed, and lift the
// latch.
type keptState struct {
	Schema        int                `json:"schema"`
	EnvID         string             `json:"env_id"`
	SignedSerials bundle.Serials     `json:"signed_serials,omitempty"`
	Failed        map[string]Failure `json:"failed,omitempty"`
	EnvMismatch   *Latch             `json:"env_mismatch,omitempty"`
}

// saveKept writes the kept part of st to path (0600, atomically) when it differs from
// what the file holds: the idle tick writes nothing.
func saveKept(path string, st *State, redact func([]byte) []byte) error {
	k := keptState{Schema: stateSchema, EnvID: st.EnvID, SignedSerials: st.SignedSerials, Failed: st.Failed, EnvMismatch: st.EnvMismatch}
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the kept state: %w", err)
	}
	data = redact(append(data, '\n'))
	if old, err := fsutil.ReadRegular(path, maxStateFile); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("write the kept state %s: %w", path, err)
	}
	return nil
}

// readKept reads what the kept file at path holds; a missing file is nothing kept.
func readKept(path string) (keptState, error) {
	var k keptState
	data, err := fsutil.ReadRegular(path, maxStateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return k, nil
	case err != nil:
		return k, err
	}
	if err := json.Unmarshal(data, &k); err != nil {
		return keptState{}, fmt.Errorf("%s does not parse: %w", path, err)
	}
	return k, nil
}

// readTokenFile reads the OpenBao token file at path, trimmed (trimSecret); a missing
// file is "". A file that holds no possible token (empty once trimmed, larger than
// maxTokenFile, a byte that is not printable ASCII) is an error matching
// ErrTokenCorrupt that says why and never what it holds; a path that is not a regular
// file is an error matching fsutil.ErrNotRegular. The caller registers the token with
// its redactor.
func readTokenFile(path string) (string, error) {
	data, err := fsutil.ReadRegular(path, maxTokenFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, fsutil.ErrTooLarge):
		return "", &tokenCorruptError{path: path, why: fmt.Sprintf("larger than %d bytes", maxTokenFile)}
	case errors.Is(err, fsutil.ErrNotRegular):
		return "", err // it names the path and what is there
	case err != nil:
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := trimSecret(data)
	if len(tok) == 0 {
		return "", &tokenCorruptError{path: path, why: "empty"}
	}
	for _, c := range tok {
		if c < 0x20 || c > 0x7e {
			return "", &tokenCorruptError{path: path, why: "not printable ASCII"}
		}
	}
	return string(tok), nil
}

// tokenCorruptError is a token file that holds no possible token; it matches
// ErrTokenCorrupt.
type tokenCorruptError struct {
	path, why string
}

func (e *tokenCorruptError) Error() string {
	return fmt.Sprintf("the OpenBao token file %s is corrupt (%s)", e.path, e.why)
}

func (e *tokenCorruptError) Is(target error) bool { return target == ErrTokenCorrupt }

// trimSecret trims the line ends and blanks around a secret read from a file (a token,
// a grant), and nothing inside it.
func trimSecret(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}
