package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shellctl/shellctl/internal/client"
)

// The file tools: over the file routes (/v1/files), so every path is
// resolved by the server beneath its file roots.
type (
	readFileIn struct {
		Path   string `json:"path" jsonschema:"the file: absolute, or relative to the server's home"`
		Offset int    `json:"offset,omitempty" jsonschema:"the first line to answer, counted from 1"`
		Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to answer at most"`
	}
	readFileOut struct {
		Path      string `json:"path"`
		Content   string `json:"content" jsonschema:"the lines, each as its number, a tab and its text"`
		FirstLine int    `json:"first_line"`
		Lines     int    `json:"lines" jsonschema:"how many lines content holds"`
		More      bool   `json:"more" jsonschema:"the file goes on after the last line answered: call again with offset = first_line + lines"`
	}
	writeFileIn struct {
		Path    string `json:"path" jsonschema:"the file: absolute, or relative to the server's home"`
		Content string `json:"content" jsonschema:"the whole new content of the file"`
		Mode    string `json:"mode,omitempty" jsonschema:"octal mode such as 0755 (default: the replaced file's, else 0644)"`
	}
	editFileIn struct {
		Path       string `json:"path" jsonschema:"the file: absolute, or relative to the server's home"`
		OldText    string `json:"old_text" jsonschema:"the exact text to replace, whitespace and line ends included (not the line numbers read_file shows)"`
		NewText    string `json:"new_text" jsonschema:"what replaces it"`
		ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence; otherwise old_text must occur exactly once"`
	}
	listDirIn struct {
		Path   string `json:"path" jsonschema:"the directory: absolute, or relative to the server's home"`
		Hidden *bool  `json:"hidden,omitempty" jsonschema:"include names that start with a dot (default true)"`
	}
	dirEntry struct {
		Name string `json:"name"`
		Type string `json:"type" jsonschema:"file, dir, symlink, fifo, socket or device"`
		Size int64  `json:"size"`
	}
	listDirOut struct {
		Path      string     `json:"path"`
		Entries   []dirEntry `json:"entries"`
		Truncated bool       `json:"truncated" jsonschema:"more entries than answered (at most 1000)"`
	}
)

// read_file bounds: lines per answer by default, characters per line.
const (
	defaultReadLines = 2000
	maxLineChars     = 2000
	maxReadBytes     = 256 << 10 // of content per answer
)

func (s *Server) addFileTools() {
	if s.opts.Files == nil {
		return
	}
	addTool(s.srv, &sdk.Tool{
		Name:  "read_file",
		Title: "Read a text file",
		Description: fmt.Sprintf("Read a text file on the shellctl server, as numbered lines (number, tab, text). Answers at most limit lines "+
			"(default %d) from offset (default 1) and at most %d KiB; more tells whether the file goes on. Lines longer than %d characters are cut. "+
			"A binary file is refused: use shell_run (e.g. xxd, file) to look at it. Paths are absolute or relative to the server's home and must lie "+
			"beneath its file roots.", defaultReadLines, maxReadBytes>>10, maxLineChars),
		InputSchema: schemaFor[readFileIn](func(p map[string]*jsonschema.Schema) {
			p["offset"].Minimum, p["offset"].Default = num(1), []byte("1")
			p["limit"].Minimum, p["limit"].Default = num(1), []byte(fmt.Sprint(defaultReadLines))
		}),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
	}, s.readFile)
	addTool(s.srv, &sdk.Tool{
		Name:  "write_file",
		Title: "Write a file",
		Description: "Write a whole file on the shellctl server (made with its missing directories, or replaced). The write is atomic: " +
			"a reader sees the old file or the new one, never half. To change part of a file, prefer edit_file.",
		InputSchema: schemaFor[writeFileIn](nil),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: boolp(true), IdempotentHint: true, OpenWorldHint: boolp(false)},
	}, s.writeFile)
	addTool(s.srv, &sdk.Tool{
		Name:  "edit_file",
		Title: "Replace text in a file",
		Description: "Replace exact text in a UTF-8 text file on the shellctl server (at most 16 MiB), atomically. old_text must occur exactly once " +
			"(copy it from read_file without the line numbers, with enough surrounding lines to be unique), or set replace_all. " +
			"Errors: edit_no_match (the text is not in the file: read it again), edit_ambiguous (found several times: give more context), " +
			"not_text (a binary file).",
		InputSchema: schemaFor[editFileIn](nil),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: boolp(true), OpenWorldHint: boolp(false)},
	}, s.editFile)
	addTool(s.srv, &sdk.Tool{
		Name:        "list_dir",
		Title:       "List a directory",
		Description: "List a directory on the shellctl server: each entry's name, type and size, sorted by name, at most 1000 (truncated says when there are more). Links are not followed.",
		InputSchema: schemaFor[listDirIn](nil),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolp(false)},
	}, s.listDir)
}

func fileToolError(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case "path_not_allowed":
			return fmt.Errorf("%s (%s): only paths beneath the server's file roots (its home, --workspace-root, --file-root) are reachable", ce.Message, ce.Code)
		case "not_a_regular_file":
			return fmt.Errorf("%s (%s): use list_dir for a directory", ce.Message, ce.Code)
		}
	}
	return toolError(err)
}

func (s *Server) readFile(ctx context.Context, _ *sdk.CallToolRequest, in readFileIn) (*sdk.CallToolResult, readFileOut, error) {
	offset, limit := max(in.Offset, 1), in.Limit
	if limit <= 0 {
		limit = defaultReadLines
	}
	body, _, err := s.opts.Files.ReadFile(ctx, in.Path, "")
	if err != nil {
		return nil, readFileOut{}, fileToolError(err)
	}
	defer body.Close()
	br := bufio.NewReaderSize(body, 64<<10)
	head, _ := br.Peek(8 << 10)
	if bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(trimPartialRune(head)) {
		return nil, readFileOut{}, fmt.Errorf("%s is a binary file, not text: look at it with shell_run (file, xxd, head -c) instead", in.Path)
	}
	out := readFileOut{Path: in.Path, FirstLine: offset}
	var b strings.Builder
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if line == "" && err != nil {
			break
		}
		if n < offset {
			continue
		}
		if out.Lines >= limit || b.Len() >= maxReadBytes {
			out.More = true
			break
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if utf8.RuneCountInString(line) > maxLineChars {
			line = string([]rune(line)[:maxLineChars]) + " …(line cut)"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, line)
		out.Lines++
		if err == io.EOF {
			break
		}
	}
	out.Content = b.String()
	if out.Lines == 0 && offset > 1 {
		return nil, readFileOut{}, fmt.Errorf("%s has fewer than %d lines: read from a smaller offset", in.Path, offset)
	}
	return nil, out, nil
}

// trimPartialRune drops a rune cut at the end of a peeked window.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

func (s *Server) writeFile(ctx context.Context, _ *sdk.CallToolRequest, in writeFileIn) (*sdk.CallToolResult, client.FileWritten, error) {
	w, err := s.opts.Files.WriteFile(ctx, in.Path, strings.NewReader(in.Content), int64(len(in.Content)), in.Mode, true, "")
	if err != nil {
		return nil, client.FileWritten{}, fileToolError(err)
	}
	return nil, *w, nil
}

func (s *Server) editFile(ctx context.Context, _ *sdk.CallToolRequest, in editFileIn) (*sdk.CallToolResult, client.FileEdited, error) {
	e, err := s.opts.Files.EditFile(ctx, client.FileEdit{Path: in.Path, OldText: in.OldText, NewText: in.NewText, ReplaceAll: in.ReplaceAll})
	if err != nil {
		return nil, client.FileEdited{}, fileToolError(err)
	}
	return nil, *e, nil
}

func (s *Server) listDir(ctx context.Context, _ *sdk.CallToolRequest, in listDirIn) (*sdk.CallToolResult, listDirOut, error) {
	hidden := in.Hidden == nil || *in.Hidden
	l, err := s.opts.Files.ListDir(ctx, in.Path, 1000, hidden)
	if err != nil {
		return nil, listDirOut{}, fileToolError(err)
	}
	out := listDirOut{Path: l.Path, Entries: make([]dirEntry, 0, len(l.Entries)), Truncated: l.Truncated}
	for _, e := range l.Entries {
		out.Entries = append(out.Entries, dirEntry{Name: e.Name, Type: e.Type, Size: e.Size})
	}
	return nil, out, nil
}
