package composecheck

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestImagesOfTheModel(t *testing.T) {
	compose := `services:
  web:
    image: registry.example/acme/web:${TAG}
    pull_policy: always
  worker:
    build: ./worker
  tool:
    image: acme/tool:1
    build: ./tool
  private:
    image: ${IMAGE_FROM_SECRET}
  debug:
    image: acme/debug:1
    profiles: [debug]
`
	in := composeInput(compose, map[string]string{"worker/Dockerfile": "FROM scratch\n", "tool/Dockerfile": "FROM scratch\n"})
	in.Vars, in.SecretNames = map[string]string{"TAG": "1.2.3"}, []string{"IMAGE_FROM_SECRET"}
	res := Check(context.Background(), in)
	require.Empty(t, res.Findings)
	require.Equal(t, []Image{
		{Service: "private", Ref: secretPlaceholder, FromSecret: true},
		{Service: "tool", Ref: "acme/tool:1", Build: true},
		{Service: "web", Ref: "registry.example/acme/web:1.2.3", PullPolicy: "always"},
		{Service: "worker", Build: true},
	}, res.Images, "one image per service compose up starts (the profile's is left out), interpolated, in service order")
}
