package engine

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
)

// Image is one image of the daemon.
type Image struct {
	// ID is the image ID, "sha256:" and 64 hex digits.
	ID string
	// RepoTags are the image's tags, e.g. "monky/web:1.2"; empty for a dangling image
	// (the "<none>:<none>" older daemons send is dropped).
	RepoTags []string
	// Size is the image's size in bytes, its layers included.
	Size int64
}

// imageID is the only form RemoveImage accepts.
var imageID = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Images returns the daemon's images (GET /images/json), in the daemon's order.
func (c *Client) Images(ctx context.Context) ([]Image, error) {
	var list []struct {
		ID       string   `json:"Id"`
		RepoTags []string `json:"RepoTags"`
		Size     int64    `json:"Size"`
	}
	if err := c.getJSON(ctx, "images", "/images/json", nil, &list); err != nil {
		return nil, err
	}
	out := make([]Image, 0, len(list))
	for _, im := range list {
		tags := slices.DeleteFunc(im.RepoTags, func(t string) bool { return t == "<none>:<none>" })
		if len(tags) == 0 {
			tags = nil
		}
		out = append(out, Image{ID: im.ID, RepoTags: tags, Size: im.Size})
	}
	return out, nil
}

// ProjectImages returns the IDs of the images the compose project's containers use,
// stopped ones included: the images a release named, as the engine resolved them.
func (c *Client) ProjectImages(ctx context.Context, project string) (map[string]bool, error) {
	const op = "project images"
	body, err := c.projectList(ctx, op, project)
	if err != nil {
		return nil, err
	}
	var list []summary
	if err := jsonUnmarshal(body, &list); err != nil {
		return nil, &Error{Op: op, Host: c.host, Path: "/containers/json", Err: err}
	}
	return imageIDs(list), nil
}

// imageIDs are the image IDs of containers.
func imageIDs(list []summary) map[string]bool {
	used := map[string]bool{}
	for _, s := range list {
		if s.ImageID != "" {
			used[s.ImageID] = true
		}
	}
	return used
}

// ImagesInUse returns the IDs of the images that containers use, stopped containers
// included (GET /containers/json?all=1): the images a removal would refuse.
func (c *Client) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	var list []summary
	if err := c.getJSON(ctx, "images in use", "/containers/json", url.Values{"all": {"1"}}, &list); err != nil {
		return nil, err
	}
	return imageIDs(list), nil
}

// RemoveImage removes the image with the given ID (DELETE /images/{id}, never forced,
// so the daemon refuses what a container still uses). It accepts only an ID,
// "sha256:" and 64 lowercase hex digits, never a name or a tag, so that it removes
// exactly the image meant. The daemon's 409 matches ErrInUse (a container uses the
// image, or it is tagged in several repositories), its 404 ErrNotFound.
func (c *Client) RemoveImage(ctx context.Context, id string) error {
	const op = "remove image"
	if !imageID.MatchString(id) {
		return &Error{Op: op, Host: c.host, Path: "/images/{id}",
			Err: errors.New("refused: not an image ID (sha256: and 64 lowercase hex digits); names and tags are never removed")}
	}
	path := "/images/" + id
	if _, err := c.do(ctx, op, http.MethodDelete, path, nil); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "docker engine: image removed", "image", id)
	return nil
}
