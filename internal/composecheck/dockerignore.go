package composecheck

import (
	"bytes"
	"path"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// dockerignoreName is the ignore file BuildKit reads at the root of a build context.
const dockerignoreName = ".dockerignore"

// isDockerignore reports whether a bundle path is an ignore file the builder may read:
// a context's .dockerignore or a Dockerfile's <dockerfile>.dockerignore.
func isDockerignore(p string) bool {
	return strings.HasSuffix(path.Base(p), dockerignoreName)
}

// IsDockerignore reports whether a bundle path is a .dockerignore or a
// <dockerfile>.dockerignore file: the files Check needs in Input.Files to judge a
// build context that holds the release's .env.
func IsDockerignore(p string) bool { return isDockerignore(p) }

// ignoreExcludesEnv reports whether the content of an ignore file keeps the release's
// .env out of a context whose root is the release directory. It follows the
// builder's own rules: BuildKit reads the file with patternmatcher's ignorefile
// (comments, whitespace, a leading "/" and path cleaning) and the file transfer
// applies the patterns in order, the last match winning ("!" re-includes), with "**"
// matching any number of directories. .env sits at the context's root, so no parent
// directory can exclude it. An error means the builder would fail on the file too;
// the caller treats it as not excluding.
func ignoreExcludesEnv(content []byte) (bool, error) {
	patterns, err := ignorefile.ReadAll(bytes.NewReader(content))
	if err != nil {
		return false, err
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return false, err
	}
	return pm.MatchesOrParentMatches(renderedEnv)
}

// envInContext adds a finding when a build context that is the release directory
// would send the rendered .env (every secret of the environment) to the builder,
// where a COPY bakes it into an image layer. candidates are the bundle paths of the
// ignore files the builder would use, in precedence order: the first one present
// decides, as BuildKit takes <dockerfile>.dockerignore over the context's
// .dockerignore. key names the setting ("build.context ." or an additional context).
func (s *scanner) envInContext(key string, candidates []string) {
	if len(s.c.in.SecretNames) == 0 {
		// Without secrets the .env holds only vars, which the bundle shows anyway.
		return
	}
	listed := map[string]bool{}
	for _, f := range s.c.in.BundleFiles {
		listed[f] = true
	}
	var why, fix string
	for _, name := range candidates {
		if !listed[name] {
			continue
		}
		fix = "add .env to " + name
		content, ok := s.c.in.Files[name]
		if !ok {
			why = name + " could not be read for the check (put manifest.json first in the tar)"
			break
		}
		excluded, err := ignoreExcludesEnv(content)
		switch {
		case err != nil:
			why = name + " cannot be parsed"
		case excluded:
			return
		default:
			why = name + " does not exclude it"
		}
		break
	}
	if why == "" {
		why = "no .dockerignore excludes it"
		fix = "add .env to " + candidates[len(candidates)-1]
	}
	s.add("%s sends the release's .env, which holds every secret of the environment, to the builder (a COPY bakes it into the image), and %s; %s or build from a subdirectory",
		key, why, fix)
}

// contextIgnoreFiles returns the ignore files of a build context at the release root,
// in BuildKit's order: <dockerfile>.dockerignore next to the Dockerfile (when the
// Dockerfile is a file of the release), then the context's .dockerignore.
func contextIgnoreFiles(dir string, b dockerfileRef) []string {
	var out []string
	if b.inline == "" {
		df := b.dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if !path.IsAbs(df) {
			df = path.Join(b.context, df)
		}
		if rel, ok := inDir(dir, df); ok && rel != "." {
			out = append(out, rel+dockerignoreName)
		}
	}
	return append(out, dockerignoreName)
}

// dockerfileRef is what contextIgnoreFiles needs of a build section.
type dockerfileRef struct {
	context, dockerfile, inline string
}
