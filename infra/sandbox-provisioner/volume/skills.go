package volume

import (
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
)

// SkillDir is one skill written into a scope's read-only skills directory
// (/home/gem/skills/<slug>) by the platform, never by the sandbox.
type SkillDir struct {
	Slug  string      `json:"slug"`
	Hash  string      `json:"hash"`
	Files []SkillFile `json:"files"`
}

// SkillFile is one file of a skill, its path relative to the skill.
type SkillFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

var skillSlug = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// hashFile records the content hash a skill directory was written from.
const hashFile = ".skill-hash"

// SyncSkills makes the scope's skills directory hold exactly skills: a
// skill whose recorded hash matches is kept, others are written to a
// temporary directory and renamed into place, and directories of skills
// not listed are removed. Paths are checked (no "..", no absolute path)
// and every write goes through an os.Root of the skills directory.
func (f *Files) SyncSkills(s Scope, skills []SkillDir) error {
	s, err := s.Normalize()
	if err != nil {
		return err
	}
	if _, err := f.Layout.Prepare(s); err != nil {
		return err
	}
	dir := f.Layout.DirsOf(s).Skills
	rt, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer rt.Close()
	keep := map[string]bool{}
	for _, sk := range skills {
		if !skillSlug.MatchString(sk.Slug) || len(sk.Slug) > 128 {
			return fmt.Errorf("%w: skill slug %q", ErrPathNotAllowed, sk.Slug)
		}
		keep[sk.Slug] = true
		if old, err := rt.ReadFile(path.Join(sk.Slug, hashFile)); err == nil && string(old) == sk.Hash && sk.Hash != "" {
			continue
		}
		tmp := "." + sk.Slug + ".tmp"
		_ = rt.RemoveAll(tmp)
		if err := rt.Mkdir(tmp, 0o755); err != nil {
			return err
		}
		for _, file := range append(sk.Files, SkillFile{Path: hashFile, Data: []byte(sk.Hash)}) {
			p := path.Clean(file.Path)
			if p == "." || strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
				_ = rt.RemoveAll(tmp)
				return fmt.Errorf("%w: skill file %q", ErrPathNotAllowed, file.Path)
			}
			if err := rt.MkdirAll(path.Dir(path.Join(tmp, p)), 0o755); err != nil {
				return err
			}
			if err := rt.WriteFile(path.Join(tmp, p), file.Data, 0o644); err != nil {
				return err
			}
		}
		if err := rt.RemoveAll(sk.Slug); err != nil {
			return err
		}
		if err := rt.Rename(tmp, sk.Slug); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := rt.RemoveAll(e.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
