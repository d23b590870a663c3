package snapshot

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// ErrBadPattern marks an exclude pattern that cannot be compiled (an unclosed
// "[" for instance). The HTTP layer answers it as 400 invalid_request.
var ErrBadPattern = errors.New("malformed exclude pattern")

// matcher decides whether a path relative to Home is excluded. It wraps the
// gitignore matcher of go-git: patterns are matched against path components
// (so "*" and "?" never cross a "/"), bare names match at any depth, a "/"
// at the start or in the middle anchors to Home, a trailing "/" matches
// directories only, "**" spans zero or more directories, "!" re-includes and
// the last matching pattern wins.
type matcher struct {
	m gitignore.Matcher // nil when there are no patterns
}

// compileExcludes compiles the patterns in order. Blank patterns are
// ignored. A pattern whose glob syntax is malformed is an error wrapping
// ErrBadPattern, so a typo does not silently exclude nothing.
func compileExcludes(patterns []string) (*matcher, error) {
	var ps []gitignore.Pattern
	for _, raw := range patterns {
		p := strings.TrimSpace(raw)
		if p == "" || p == "!" {
			continue
		}
		if err := checkGlob(p); err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadPattern, raw, err)
		}
		ps = append(ps, gitignore.ParsePattern(rewriteTrailingDoubleStar(p), nil))
	}
	if len(ps) == 0 {
		return &matcher{}, nil
	}
	return &matcher{m: gitignore.NewMatcher(ps)}, nil
}

// rewriteTrailingDoubleStar turns "dir/**" into "dir/**/*". In gitignore,
// "dir/**" matches everything inside dir but not dir itself; go-git's
// matcher also matches dir itself, which would make "!dir/keep" unable to
// re-include anything (an excluded directory is not descended into), and
// makes "/**" match nothing at all. "dir/**/*" has exactly git's meaning in
// go-git's matcher.
func rewriteTrailingDoubleStar(p string) string {
	neg := strings.HasPrefix(p, "!")
	body := strings.TrimPrefix(p, "!")
	dirOnly := strings.HasSuffix(body, "/")
	body = strings.TrimSuffix(body, "/")
	if body == "/**" || strings.HasSuffix(body, "/**") {
		body += "/*"
	}
	if dirOnly {
		body += "/"
	}
	if neg {
		body = "!" + body
	}
	return body
}

// checkGlob validates the glob syntax of every component of p.
func checkGlob(p string) error {
	for _, c := range strings.Split(strings.TrimPrefix(p, "!"), "/") {
		if _, err := filepath.Match(c, ""); err != nil {
			return err
		}
	}
	return nil
}

// excluded reports whether the path (components relative to Home) is
// excluded by the patterns.
func (m *matcher) excluded(path []string, isDir bool) bool {
	if m == nil || m.m == nil {
		return false
	}
	return m.m.Match(path, isDir)
}
