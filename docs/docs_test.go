// Package docs holds the reference; its test checks the links between the
// documents and that the API reference names every route.
package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// mdFiles are README.md and every Markdown file under docs/ and clients/.
func mdFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "../CHANGELOG.md"}
	for _, dir := range []string{".", "../clients", "../deploy"} {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".md") {
				files = append(files, p)
			}
			return nil
		})
	}
	return files
}

// anchors are the ids GitHub gives a Markdown file's headings: lower case,
// what is not a letter, digit, space, '-' or '_' dropped, spaces as '-',
// a repeated one with -1, -2 … Headings in fenced code are not headings.
func anchors(md []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimLeft(line, " ")
		if f := fenceOf(trim); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence != "" || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if text == "" || !strings.HasPrefix(line, strings.Repeat("#", len(line)-len(strings.TrimLeft(line, "#")))+" ") {
			continue
		}
		id := slug(text)
		if n := seen[id]; n > 0 {
			out[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

func fenceOf(line string) string {
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(line, f) {
			n := len(line) - len(strings.TrimLeft(line, f[:1]))
			return strings.Repeat(f[:1], n)
		}
	}
	return ""
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// link is [text](target) outside fenced and inline code.
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

func links(md []byte) []string {
	var out []string
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := fenceOf(strings.TrimLeft(line, " ")); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		// inline code spans hold examples, not links
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 {
			for _, m := range link.FindAllStringSubmatch(parts[i], -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// TestRelativeLinksResolve: every relative link in README.md, CHANGELOG.md
// and the Markdown under docs/, clients/ and deploy/ names a file of the
// repository, and every #anchor a heading of the file it points into.
func TestRelativeLinksResolve(t *testing.T) {
	root, _ := filepath.Abs("..")
	cache := map[string]map[string]bool{}
	checked := 0
	for _, f := range mdFiles(t) {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range links(md) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
			}
			abs, _ := filepath.Abs(path)
			if !strings.HasPrefix(abs, root+string(filepath.Separator)) {
				t.Errorf("%s: link %q leaves the repository (a reader of the repository cannot follow it)", f, target)
				continue
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s: link %q: %v", f, target, err)
				continue
			}
			if anchor == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %q: an anchor into something that is not a Markdown file", f, target)
				continue
			}
			a, ok := cache[abs]
			if !ok {
				b, _ := os.ReadFile(path)
				a = anchors(b)
				cache[abs] = a
			}
			if !a[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", f, target, path, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: the link parser is broken", checked)
	}
}

// TestAPIReferenceNamesEveryRoute: docs/api.md names each route of the
// OpenAPI document as "METHOD /path", with the document's path template.
func TestAPIReferenceNamesEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../internal/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile("api.md")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				routes = append(routes, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(routes)
	if len(routes) < 10 {
		t.Fatalf("only %d routes in the OpenAPI document: %v", len(routes), routes)
	}
	for _, r := range routes {
		if !bytes.Contains(ref, []byte(r)) {
			t.Errorf("docs/api.md does not name %s", r)
		}
	}
}

// TestAnchorSlugs pins the heading-to-anchor rule the link test relies on.
func TestAnchorSlugs(t *testing.T) {
	for in, want := range map[string]string{
		"Screen and keys: driving full-screen programs": "screen-and-keys-driving-full-screen-programs",
		"`shellctl serve`":                  "shellctl-serve",
		"Safe retries: `Idempotency-Key`":   "safe-retries-idempotency-key",
		"Job cgroups of servers that share": "job-cgroups-of-servers-that-share",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
	a := anchors([]byte("# A\n```sh\n# not a heading\n```\n## A\n"))
	if !a["a"] || !a["a-1"] || a["not-a-heading"] {
		t.Errorf("anchors: %v", a)
	}
}

// TestFrontPageIsAFrontPage: README.md is read in five minutes and holds
// no diary: at most 300 lines, no dates, no commit ids, no "this pass".
// The history is git's and CHANGELOG.md's.
func TestFrontPageIsAFrontPage(t *testing.T) {
	md, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(md, []byte("\n")); n > 300 {
		t.Errorf("README.md has %d lines; the front page keeps to 300 (move reference text into docs/)", n)
	}
	diary := []struct {
		what string
		re   *regexp.Regexp
	}{
		{"a date", regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b|\b\d{1,2}:\d\d UTC\b`)},
		{"a commit id", regexp.MustCompile(`\b(commit|on|at) [0-9a-f]{7,40}\b`)},
		{"a pass of work", regexp.MustCompile(`(?i)\b(this|last|previous|next) (pass|session)\b`)},
	}
	for i, line := range strings.Split(string(md), "\n") {
		for _, d := range diary {
			if m := d.re.FindString(line); m != "" {
				t.Errorf("README.md:%d holds %s (%q); history belongs in git and CHANGELOG.md", i+1, d.what, m)
			}
		}
	}
}
