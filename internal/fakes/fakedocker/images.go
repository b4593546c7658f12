package fakedocker

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// DefaultImageSize is the size of an image whose service's script sets no ImageSize:
// 10 MiB.
const DefaultImageSize int64 = 10 << 20

// serviceImages maps every service of the compose files to its image reference: the
// one it names, or "<project>-<service>", the name compose gives an image it builds.
func serviceImages(project string, services []string, named map[string]string) map[string]string {
	m := make(map[string]string, len(services))
	for _, s := range services {
		ref := named[s]
		if ref == "" {
			ref = project + "-" + s
		}
		m[s] = ref
	}
	return m
}

// NormalizeRef is the reference as docker lists it in RepoTags: a reference without a
// tag or digest gets ":latest".
func NormalizeRef(ref string) string {
	if strings.Contains(ref, "@") {
		return ref
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if strings.Contains(last, ":") {
		return ref
	}
	return ref + ":latest"
}

// ImageID is the fake's ID of the image ref: "sha256:" and the hex sha256 of the
// normalized reference (NormalizeRef), so that a test can compute it.
func ImageID(ref string) string {
	return imageID(ref)
}

func imageID(ref string) string {
	sum := sha256.Sum256([]byte(NormalizeRef(ref)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// learnImage adds the image of c to the images the engine holds, once.
func (r *run) learnImage(st *Status, c container) {
	id := imageID(c.image)
	for _, im := range st.Images {
		if im.ID == id {
			return
		}
	}
	size := r.service(st, c.service).ImageSize
	if size <= 0 {
		size = DefaultImageSize
	}
	st.Images = append(st.Images, Image{ID: id, Ref: NormalizeRef(c.image), Size: size, Created: st.UpAt})
}
