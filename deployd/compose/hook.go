package compose

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// ExitLater is the exit status by which a hook asks to be run again later (as
// Mender's state scripts' 21): the caller runs it again at a later run.
const ExitLater = 75

// containerNameRE is docker's rule for a container name.
var containerNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// noSuchContainerRE is what docker rm says of a container that does not exist.
var noSuchContainerRE = regexp.MustCompile(`(?i)no such container`)

// RunHook runs one one-shot service of the project as a hook, without touching the
// project's other containers: docker compose --profile PROFILE run --rm --no-deps -T
// --name NAME SERVICE, from the project directory (so with its .env). Output is the
// bounded tail of what the hook printed and its exit code (ExitCode; -1 and Stop when
// it did not exit by itself, e.g. ctx's deadline passed: the container may still run,
// RemoveContainer(NAME) stops it). A non-zero exit returns an *Error of Kind
// ErrCommandFailed; its cause is ErrDockerUnavailable when the daemon cannot be
// reached. Every line is logged as it comes, through the Client's logger.
func (c *Client) RunHook(ctx context.Context, profile, service, name string) (Output, error) {
	for _, s := range []string{profile, service, name} {
		if !containerNameRE.MatchString(s) {
			return Output{ExitCode: -1}, &Error{Op: "run", Kind: ErrCommandFailed, ExitCode: -1, Services: []string{service},
				Detail: fmt.Sprintf("%q is not a compose profile, service or container name", s)}
		}
	}
	args := append(append([]string(nil), c.base...), "--profile", profile,
		"run", "--rm", "--no-deps", "-T", "--name", name, service)
	start := time.Now()
	out, err := c.runLogged(ctx, "run "+service, ErrCommandFailed, args)
	c.log.Info("docker compose run of a hook ended", "service", service, "container", name, "exit_code", out.ExitCode,
		"stop", string(out.Stop), "duration", time.Since(start).Round(time.Millisecond))
	return out, err
}

// RemoveContainer removes the container name, running or not (docker rm -f): a hook
// whose run was killed leaves its container running. A container that does not
// exist is not an error.
func (c *Client) RemoveContainer(ctx context.Context, name string) error {
	if !containerNameRE.MatchString(name) {
		return &Error{Op: "rm", Kind: ErrCommandFailed, ExitCode: -1, Detail: fmt.Sprintf("%q is not a container name", name)}
	}
	out, err := c.runTail(ctx, "rm", ErrCommandFailed, []string{"rm", "-f", "--", name})
	if err != nil && noSuchContainerRE.Match(out.Tail) {
		return nil
	}
	return err
}
