package intake

import (
	"io"
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/usersettings"
)

// User settings (user_router): each route reads or writes the caller's own
// settings; no route names another user.

func (s *Server) getUserConfig(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.d.Settings == nil {
		return errNoSettings
	}
	c, err := s.d.Settings.Config(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) updateUserConfig(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.d.Settings == nil {
		return errNoSettings
	}
	var in usersettings.ConfigUpdate
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	c, err := s.d.Settings.UpdateConfig(r.Context(), p.UserID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) getAgentEnv(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.d.Settings == nil {
		return errNoSettings
	}
	e, err := s.d.Settings.AgentEnv(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) updateAgentEnv(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.d.Settings == nil {
		return errNoSettings
	}
	var in struct {
		Env map[string]any `json:"env"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	e, err := s.d.Settings.ReplaceAgentEnv(r.Context(), p.UserID, in.Env)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) uploadUserImage(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	url, err := s.saveImage(w, r, "images")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "image_url": url, "url": url})
	return nil
}

// userImagesPrefix serves uploaded images; the key is the capability.
const userImagesPrefix = "/api/user/images/"

// saveImage stores the form's image and returns the URL that serves it.
func (s *Server) saveImage(w http.ResponseWriter, r *http.Request, kind string) (string, error) {
	if s.d.Settings == nil {
		return "", errNoSettings
	}
	r.Body = http.MaxBytesReader(w, r.Body, usersettings.MaxImageBytes+(64<<10))
	part, err := filePart(w, r)
	if err != nil {
		if bodyTooLarge(err) {
			return "", usersettings.ErrImageTooLarge
		}
		return "", err
	}
	key, _, err := s.d.Settings.SaveImage(r.Context(), kind, imageBody{part})
	if err != nil {
		return "", err
	}
	return userImagesPrefix + key[len(usersettings.ImagePrefix):], nil
}

// imageBody maps the body limit cutting a read to image_too_large.
type imageBody struct{ r io.Reader }

func (b imageBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && bodyTooLarge(err) {
		return n, usersettings.ErrImageTooLarge
	}
	return n, err
}

// userImage serves an uploaded image to anyone holding its unguessable key
// (<img> tags send no token), as the original's public object URLs.
func (s *Server) userImage(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	if s.d.Settings == nil {
		return usersettings.ErrImageNotFound
	}
	rc, info, err := s.d.Settings.Image(r.Context(), r.PathValue("image_key"))
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", info.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.Header().Set("Cache-Control", "public, max-age=86400, immutable")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox")
	_, _ = io.Copy(w, rc)
	return nil
}
