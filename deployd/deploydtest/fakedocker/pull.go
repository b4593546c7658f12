package fakedocker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// image is the program's `docker image` command: inspect only.
func (r *run) image(args []string) int {
	if len(args) == 0 || args[0] != "inspect" {
		return r.usage(usageError("docker image: the fake knows inspect only"))
	}
	vals, pos, err := parseFlags("docker image inspect", args[1:], flagSpec{"-f": true, "--format": true}, false)
	if err != nil {
		return r.usage(err)
	}
	if f := last(vals, "-f", "--format"); f != "" && f != "{{.Id}}" {
		return r.usage(usageError(fmt.Sprintf("docker image inspect --format %q: the fake knows {{.Id}}", f)))
	}
	if len(pos) == 0 {
		return r.usage(usageError("docker image inspect needs at least one image"))
	}
	return r.do("image inspect", func(st *fakeState, out *outcome) error {
		for _, ref := range pos {
			if !holds(st, ref) {
				// docker 20.10's words; later versions say "Error response from
				// daemon: No such image: …": both hold "No such image".
				_ = out.fail("Error: No such image: %s\n", ref)
				continue
			}
			fmt.Fprintln(&out.stdout, ImageID(ref))
		}
		return nil
	})
}

// holds reports whether the fake engine holds the image ref.
func holds(st *fakeState, ref string) bool {
	id := ImageID(ref)
	return slices.ContainsFunc(st.Images, func(im heldImage) bool { return im.ID == id })
}

// pull is the program's `docker pull REF`: the image's plain progress lines and the
// image learned, or the daemon's words for an image the registry does not have
// (Script.MissingImages). The script's "pull" command scripts other failures (a
// registry that cannot be reached) and delays.
func (r *run) pull(args []string) int {
	_, pos, err := parseFlags("docker pull", args, flagSpec{"-q": false, "--quiet": false, "--platform": true}, false)
	if err != nil {
		return r.usage(err)
	}
	if len(pos) != 1 {
		return r.usage(usageError("docker pull takes one image"))
	}
	ref := pos[0]
	return r.do("pull", func(st *fakeState, out *outcome) error {
		norm := normalizeRef(ref)
		repo, tag := splitRef(norm)
		if slices.Contains(r.script.MissingImages, ref) || slices.Contains(r.script.MissingImages, norm) {
			return out.fail("Error response from daemon: manifest for %s not found: manifest unknown: manifest unknown\n", ref)
		}
		sum := sha256.Sum256([]byte(norm))
		layer := hex.EncodeToString(sum[:])[:12]
		fmt.Fprintf(&out.stdout, "%s: Pulling from %s\n%s: Pulling fs layer\n%s: Download complete\n%s: Pull complete\n", tag, repo, layer, layer, layer)
		fmt.Fprintf(&out.stdout, "Digest: %s\nStatus: Downloaded newer image for %s\n%s\n", ImageID(ref), norm, norm)
		hold(st, ref, 0)
		return nil
	})
}

// splitRef splits a normalized reference into its repository and its tag (or digest).
func splitRef(norm string) (repo, tag string) {
	if i := strings.LastIndex(norm, "@"); i >= 0 {
		return norm[:i], norm[i+1:]
	}
	i := strings.LastIndex(norm, ":")
	return norm[:i], norm[i+1:]
}
