package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/shellctl/shellctl/internal/isolation"
)

// Where serve's token comes from (isolation.md, "Access to the server").
const (
	envToken     = "SHELLCTL_AUTH_TOKEN"
	envTokenFile = "SHELLCTL_AUTH_TOKEN_FILE"
	// maxTokenFile bounds what is read of a token file: a token is one
	// line, and a wrong path (a log, a device) must not be slurped.
	maxTokenFile = 64 << 10
)

// tokenChoice is the token serve settled on and where it came from.
type tokenChoice struct {
	token string
	from  string // "--token", "--token-file /p", "SHELLCTL_AUTH_TOKEN_FILE /p", "SHELLCTL_AUTH_TOKEN" or ""
	notes []string
}

// resolveToken picks serve's token, first match wins:
//
//  1. --token, when non-empty;
//  2. --token-file PATH;
//  3. $SHELLCTL_AUTH_TOKEN_FILE, when non-empty;
//  4. $SHELLCTL_AUTH_TOKEN.
//
// Both flags at once is a usage error (which one was meant is unknowable).
// A token file must be readable and hold one non-empty line; its trailing
// newline ("\n" or "\r\n") is dropped and nothing else is trimmed. Values
// are used exactly as given.
func resolveToken(flagToken, flagFile string, getenv func(string) string) (tokenChoice, error) {
	if flagToken != "" && flagFile != "" {
		return tokenChoice{}, &usageError{"--token and --token-file are both given: pass one of them (--token-file keeps the token out of /proc)"}
	}
	if flagToken != "" {
		return tokenChoice{token: flagToken, from: "--token"}, nil
	}
	var c tokenChoice
	what, path := "--token-file", flagFile
	if path == "" {
		what, path = envTokenFile, getenv(envTokenFile)
	}
	if path != "" {
		tok, note, err := readTokenFile(path, what)
		if err != nil {
			return tokenChoice{}, err
		}
		c = tokenChoice{token: tok, from: what + " " + path}
		if note != "" {
			c.notes = append(c.notes, note)
		}
		if getenv(envToken) != "" {
			c.notes = append(c.notes, fmt.Sprintf("%s is set but ignored: the token comes from %s", envToken, c.from))
		}
		return c, nil
	}
	if tok := getenv(envToken); tok != "" {
		return tokenChoice{token: tok, from: envToken}, nil
	}
	return tokenChoice{}, nil
}

// readTokenFile reads a token file (what names the flag or variable that
// gave path, for messages). note, when set, is a warning worth logging.
func readTokenFile(path, what string) (tok, note string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("reading the token file given by %s: %w (give a readable file holding the token on one line)", what, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		note = fmt.Sprintf("token file %s is readable by others (mode %#o): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", "", fmt.Errorf("reading the token file %s given by %s: %w", path, what, err)
	}
	if len(b) > maxTokenFile {
		return "", "", fmt.Errorf("token file %s given by %s is larger than %d bytes: it must hold the token on one line", path, what, maxTokenFile)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	switch {
	case strings.ContainsAny(s, "\n"):
		return "", "", fmt.Errorf("token file %s given by %s has more than one line: it must hold the token on one line", path, what)
	case s == "":
		return "", "", fmt.Errorf("token file %s given by %s is empty: write the token into it, or drop %s to run without a token", path, what, what)
	}
	return s, note, nil
}

// procMemory returns this process's argument and environment memory, the
// bytes the kernel serves as /proc/self/cmdline and /proc/self/environ
// (arg_start to env_end in /proc/self/stat), and where the environment
// starts in it. Go's os.Args strings point into that memory, which gives
// its address; ok is false when the layout is not the one known, and then
// nothing may be written.
func procMemory() (mem []byte, envOff int, ok bool) {
	if len(os.Args) == 0 || len(os.Args[0]) == 0 {
		return nil, 0, false
	}
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return nil, 0, false
	}
	// Fields after the command name, which may itself hold spaces.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return nil, 0, false
	}
	fields := strings.Fields(string(raw[i+1:]))
	// proc(5): arg_start is field 48, env_start 50, env_end 51; fields[0]
	// is field 3 (state).
	if len(fields) < 49 {
		return nil, 0, false
	}
	var v [3]uint64
	for k, f := range []string{fields[45], fields[47], fields[48]} {
		if v[k], err = strconv.ParseUint(f, 10, 64); err != nil {
			return nil, 0, false
		}
	}
	argStart, envStart, envEnd := v[0], v[1], v[2]
	base := unsafe.StringData(os.Args[0])
	if uint64(uintptr(unsafe.Pointer(base))) != argStart || envStart < argStart || envEnd < envStart {
		return nil, 0, false
	}
	return unsafe.Slice(base, envEnd-argStart), int(envStart - argStart), true
}

// scrubArgs overwrites every copy of secret in this process's argument and
// environment memory, so /proc/<pid>/cmdline (readable by every process of
// the machine, jobs included) and /proc/<pid>/environ no longer show it.
// Callers hold their own copy (strings.Clone) first: pflag's values point
// into that memory.
func scrubArgs(secret string) {
	mem, _, ok := procMemory()
	if !ok || secret == "" {
		return
	}
	sec := []byte(secret)
	// The search goes on after each overwrite: a token of x's would
	// otherwise be found again in its own overwrite, forever.
	for from := 0; from < len(mem); {
		k := bytes.Index(mem[from:], sec)
		if k < 0 {
			return
		}
		k += from
		for j := k; j < k+len(sec); j++ {
			mem[j] = 'x'
		}
		from = k + len(sec)
	}
}

// errScrubLayout says the argument memory is not laid out as known, so the
// environment could not be scrubbed.
var errScrubLayout = errors.New("the process's argument memory is not laid out as expected; its environment was not scrubbed")

// scrubEnv overwrites, in this process's environment memory (what
// /proc/<pid>/environ shows), the value of every variable that looks like a
// credential (isolation.IsCredential: by name, or a password in a URL
// value), and returns their names. Go's own view is kept: the runtime
// copies the environment to its heap at start (unlike os.Args, whose
// strings point into that memory), so os.Getenv and os.Environ still give
// the server what it was started with — TestScrubEnv checks it. Jobs never
// get these variables from it: BuildEnv drops them by the same rule.
func scrubEnv() ([]string, error) {
	mem, envOff, ok := procMemory()
	if !ok {
		return nil, errScrubLayout
	}
	type span struct{ off, n int }
	var spans []span
	var names []string
	seen := map[string]bool{}
	env := mem[envOff:]
	for off := 0; off < len(env); {
		n := bytes.IndexByte(env[off:], 0)
		if n < 0 {
			n = len(env) - off
		}
		kv := env[off : off+n]
		if k, v, ok := bytes.Cut(kv, []byte("=")); ok && len(v) > 0 && isolation.IsCredential(string(k), string(v)) {
			spans = append(spans, span{envOff + off + len(k) + 1, len(v)})
			if name := string(k); !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
		off += n + 1
	}
	for _, s := range spans {
		for j := s.off; j < s.off+s.n; j++ {
			mem[j] = 'x'
		}
	}
	return names, nil
}
