package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// readText reads path ("-" is stdin) byte for byte and refuses input that is
// not valid UTF-8, so nothing is sent that the backend would have to mangle.
func (a *app) readText(what, path string) (string, error) {
	var b []byte
	var err error
	name := path
	if path == "-" {
		name = "standard input"
		b, err = io.ReadAll(a.stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", &failure{What: what, Code: codeFileNotFound, Message: path + " does not exist"}
	case err != nil:
		return "", &failure{What: what, Code: codeReadFailed, Message: oneLine(err.Error())}
	}
	if !utf8.Valid(b) {
		return "", &failure{What: what, Code: codeInvalidUTF8,
			Message: fmt.Sprintf("%s is not valid UTF-8 (first bad byte at offset %d); nothing was sent", name, firstInvalid(b))}
	}
	return string(b), nil
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// writeFile writes data to path through a temporary file in the same
// directory and a rename, creating directories, and returns the absolute
// path. A reader never sees a half-written file.
func writeFile(path string, data []byte) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(abs)+".tmp-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return abs, os.Rename(tmp.Name(), abs)
}

// printJSON writes v as one line of JSON: keys of maps sorted, no HTML
// escaping, numbers as they came.
func (a *app) printJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := a.stdout.Write(buf.Bytes())
	return err
}

// printReply prints a backend reply as stable JSON: decoded and encoded again
// so the key order and spacing do not depend on the backend. indent is for
// people; --json output is one line.
func (a *app) printReply(raw json.RawMessage, indent bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if !indent {
		return a.printJSON(v)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := a.stdout.Write(buf.Bytes())
	return err
}
