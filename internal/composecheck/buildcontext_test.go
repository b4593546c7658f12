package composecheck

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// A build context that holds the release root sends the rendered .env (every secret
// of the environment) to the builder, where `COPY . /app` bakes it into an image
// layer. With secrets in the bundle that is refused unless the .dockerignore the
// builder uses excludes .env.
func TestCheckBuildContextHoldsTheEnv(t *testing.T) {
	const build = "services:\n  app:\n    image: x\n    build: .\n"
	// sends is the refusal of a build context that holds the release's .env: who sends
	// it, why no ignore file keeps it out, and the ignore file to fix.
	sends := func(who, why, ignore string) []string {
		return []string{who + " sends the release's .env, which holds every secret of the environment, to the builder (a COPY bakes it into the image), and " +
			why + "; add .env to " + ignore + " or build from a subdirectory"}
	}
	const app, root = "service app: build.context .", `service app: build.additional_contexts: "root" (the release directory)`
	noIgnore, notExcluded := sends(app, "no .dockerignore excludes it", ".dockerignore"), sends(app, ".dockerignore does not exclude it", ".dockerignore")
	tests := []struct {
		name    string
		compose string
		files   map[string]string // more bundle files
		dropped bool              // files are in BundleFiles only, not kept for the check
		secrets []string          // nil: S alone
		allow   []string
		want    []string // PRIVILEGED details; nil: accepted
	}{
		{name: "build . without secrets is fine as today", compose: build, secrets: []string{}},
		{name: "build . with secrets and no .dockerignore", compose: build, secrets: []string{"DB_PASSWORD"}, want: noIgnore},
		{name: "long syntax context .", compose: "services:\n  app:\n    image: x\n    build:\n      context: .\n      dockerfile: Dockerfile\n", want: noIgnore},
		{name: "context ./ is the release root too", compose: "services:\n  app:\n    build: ./\n", want: noIgnore},
		{name: ".dockerignore excludes .env", compose: build, files: map[string]string{".dockerignore": "node_modules\n.env\n"}},
		{name: ".dockerignore excludes /.env", compose: build, files: map[string]string{".dockerignore": "/.env\n"}},
		{name: ".dockerignore excludes ./.env", compose: build, files: map[string]string{".dockerignore": "  ./.env  \n"}},
		{name: ".dockerignore excludes **/.env", compose: build, files: map[string]string{".dockerignore": "**/.env\n"}},
		{name: ".dockerignore excludes .env*", compose: build, files: map[string]string{".dockerignore": ".env*\n"}},
		{name: ".dockerignore excludes everything", compose: build, files: map[string]string{".dockerignore": "*\n!src\n!package.json\n"}},
		{name: ".dockerignore with a BOM and CRLF", compose: build, files: map[string]string{".dockerignore": "\ufeff.env\r\n"}},
		{name: "an exception brings .env back", compose: build, files: map[string]string{".dockerignore": "*\n!.env\n"}, want: notExcluded},
		{name: "the last match wins", compose: build, files: map[string]string{".dockerignore": ".env\n!.env*\n"}, want: notExcluded},
		{name: "a comment excludes nothing", compose: build, files: map[string]string{".dockerignore": "# .env\n.env.example\nsrc/.env\n"}, want: notExcluded},
		{name: "a .dockerignore the builder cannot parse", compose: build, files: map[string]string{".dockerignore": ".env\n[\n"},
			want: sends(app, ".dockerignore cannot be parsed", ".dockerignore")},
		{name: "a .dockerignore not kept for the check", compose: build, files: map[string]string{".dockerignore": ".env\n"}, dropped: true,
			want: sends(app, ".dockerignore could not be read for the check (put manifest.json first in the tar)", ".dockerignore")},
		{name: "Dockerfile.dockerignore takes precedence (refused)", compose: build, files: map[string]string{".dockerignore": ".env\n", "Dockerfile.dockerignore": "node_modules\n"},
			want: sends(app, "Dockerfile.dockerignore does not exclude it", "Dockerfile.dockerignore")},
		{name: "Dockerfile.dockerignore takes precedence (accepted)", compose: build, files: map[string]string{".dockerignore": "node_modules\n", "Dockerfile.dockerignore": ".env\n"}},
		{name: "the dockerfile's own ignore file next to it", compose: "services:\n  app:\n    build:\n      context: .\n      dockerfile: docker/app.Dockerfile\n",
			files: map[string]string{"docker/app.Dockerfile.dockerignore": ".env\n"}},
		{name: "another dockerfile's ignore file does not count", compose: "services:\n  app:\n    build:\n      context: .\n      dockerfile: docker/app.Dockerfile\n",
			files: map[string]string{"Dockerfile.dockerignore": ".env\n"}, want: noIgnore},
		{name: "dockerfile_inline uses the context's .dockerignore",
			compose: "services:\n  app:\n    build:\n      context: .\n      dockerfile_inline: |\n        FROM alpine\n        COPY . /app\n",
			files:   map[string]string{"Dockerfile.dockerignore": "x\n", ".dockerignore": ".env\n"}},
		{name: "a subdirectory context never holds .env", compose: "services:\n  app:\n    build: ./app\n"},
		{name: "a git context is not in the release", compose: "services:\n  app:\n    build: https://github.com/example/app.git#main\n"},
		{name: "a parent of the release is outside it", compose: "services:\n  app:\n    build: ..\n", want: []string{"service app: build.context is outside the release"}},
		{name: "an absolute context is outside the release", compose: "services:\n  app:\n    build: /srv/app\n", want: []string{"service app: build.context is outside the release"}},
		{name: "an additional context at the release root", compose: "services:\n  app:\n    build:\n      context: ./app\n      additional_contexts:\n        root: .\n",
			want: sends(root, "no .dockerignore excludes it", ".dockerignore")},
		{name: "an additional context at the root with .dockerignore", compose: "services:\n  app:\n    build:\n      context: ./app\n      additional_contexts:\n        root: .\n",
			files: map[string]string{".dockerignore": ".env\n"}},
		{name: "an additional context reads no Dockerfile.dockerignore", compose: "services:\n  app:\n    build:\n      context: ./app\n      additional_contexts:\n        root: .\n",
			files: map[string]string{"app/Dockerfile.dockerignore": ".env\n"}, want: sends(root, "no .dockerignore excludes it", ".dockerignore")},
		{name: "a job builds too", compose: "jobs:\n  migrate:\n    image: x\n    triggers:\n      manual: true\n    build: .\n",
			want: sends("job migrate: build.context .", "no .dockerignore excludes it", ".dockerignore")},
		{name: "an allowed service", compose: build, allow: []string{"app"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := composeInput(tc.compose, tc.files)
			in.SecretNames, in.AllowPrivileged = tc.secrets, tc.allow
			if tc.secrets == nil {
				in.SecretNames = []string{"S"}
			}
			for p := range tc.files {
				if tc.dropped {
					delete(in.Files, p)
				}
			}
			r := Check(context.Background(), in)
			for _, f := range r.Findings {
				require.Equal(t, codes.Privileged, f.Code, "only PRIVILEGED findings expected: %v", r.Findings)
			}
			assert.Equal(t, tc.want, privilegedDetails(r))
		})
	}
}

// The matcher follows the builder's rules; the fuzz test holds it to two of them
// whatever comes before: a last line ".env" excludes .env, a last line "!.env"
// brings it back (nothing above .env can exclude it: it sits at the context's root).
func FuzzIgnoreExcludesEnv(f *testing.F) {
	for _, s := range []string{"", ".env", "*\n!.env", "**", "**/.env", "# c\n/.env", "[", "!", ".env\r\n", "\ufeff*", "a/**/b\n!a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		excluded, err := ignoreExcludesEnv([]byte(content))
		if err != nil {
			assert.False(t, excluded)
		}
		if strings.ContainsAny(content, "\r") {
			// A lone \r does not end a line for the builder either; the suffix
			// would join the last line.
			return
		}
		ex, err := ignoreExcludesEnv([]byte(content + "\n.env\n"))
		if err == nil {
			assert.True(t, ex, "a last .env line must exclude .env")
		}
		in, err := ignoreExcludesEnv([]byte(content + "\n!.env\n"))
		if err == nil {
			assert.False(t, in, "a last !.env line must bring .env back")
		}
	})
}

// The directory the files are loaded in is internal: a compose file that writes it as
// an absolute path names a host directory on the box, outside the real release, and
// is judged so (it must not pass as the release or a file in it).
func TestCheckLoadDirWrittenLiterallyIsOutside(t *testing.T) {
	tests := []struct{ name, compose string }{
		{"build context", "services:\n  app:\n    build: " + ReleaseDir + "\n"},
		{"bind source", "services:\n  app:\n    image: x\n    volumes:\n      - " + ReleaseDir + "/data:/data\n"},
		{"env_file", "services:\n  app:\n    image: x\n    env_file: " + ReleaseDir + "/.env\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := composeInput(tc.compose, map[string]string{".dockerignore": ".env\n"})
			in.SecretNames = []string{"S"}
			r := Check(context.Background(), in)
			require.Len(t, r.Findings, 1, "findings: %v", r.Findings)
			assert.Contains(t, r.Findings[0].Detail, "outside the release")
		})
	}
}
