package fakedocker

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// defaultImageSize is the size of an image whose service's script sets no ImageSize:
// 10 MiB.
const defaultImageSize int64 = 10 << 20

// serviceImages maps every service of the compose files to its image reference: the
// one it names, or "<project>-<service>", the name compose gives an image it builds.
func serviceImages(project string, services []string, named map[string]string) map[string]string {
	m := make(map[string]string, len(services))
	for _, s := range services {
		m[s] = cmp.Or(named[s], project+"-"+s)
	}
	return m
}

// normalizeRef is the reference as docker lists it in RepoTags: a reference without a
// tag or digest gets ":latest".
func normalizeRef(ref string) string {
	if strings.Contains(ref, "@") || strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return ref
	}
	return ref + ":latest"
}

// ImageID is the fake's ID of the image ref: "sha256:" and the hex sha256 of the
// reference as docker lists it (a reference without a tag or digest gets ":latest"),
// so that a test can compute it.
func ImageID(ref string) string {
	sum := sha256.Sum256([]byte(normalizeRef(ref)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// hold adds the image ref, of size bytes (≤ 0: defaultImageSize), to the images the
// engine holds, once.
func hold(st *fakeState, ref string, size int64) {
	if holds(st, ref) {
		return
	}
	if size <= 0 {
		size = defaultImageSize
	}
	st.Images = append(st.Images, heldImage{ID: ImageID(ref), Ref: normalizeRef(ref), Size: size, Created: st.UpAt})
}
