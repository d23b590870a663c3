// Package screen holds what the screen of a pty job is, without the
// emulator that draws it: the answer's shape (Snapshot), the bounds of
// what is emulated (Fits, MaxCells, the scrollback's caps), the bytes a
// terminal sends for named keys (keys.go), the cold screen that follows
// plain output without an emulator (cold.go), and the frames a runner
// and its screen process exchange (wire.go).
//
// The emulator itself is internal/screen/emu: it runs in its own process
// (cmd/shellctl-screen), which a runner starts only when a job's output
// needs it, so the runner's binary carries none of it.
package screen

import "fmt"

const (
	// ScrollbackLines is the most rows of scrollback kept.
	ScrollbackLines = 1000
	// ScrollbackBytes is the most bytes of scrollback text kept.
	ScrollbackBytes = 1 << 20
	// MaxCells is the largest screen emulated (cols × rows): 65 536
	// cells, e.g. 256×256 or 400×160. A larger terminal has no screen
	// (Fits is false) until it is resized within the bound.
	MaxCells = 1 << 16
)

// Fits reports whether a cols × rows terminal is within what is emulated.
func Fits(cols, rows int) bool {
	return cols >= 1 && rows >= 1 && cols*rows <= MaxCells
}

// Cursor is where the cursor is (0-based) and whether it is shown.
type Cursor struct {
	Row     int  `json:"row"`
	Col     int  `json:"col"`
	Visible bool `json:"visible"`
}

// Snapshot is the screen as the API answers it.
type Snapshot struct {
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
	Cursor    Cursor `json:"cursor"`
	AltScreen bool   `json:"alt_screen"`
	Title     string `json:"title"`
	// Lines has one entry per row, top to bottom, trailing blanks trimmed.
	Lines []string `json:"lines"`
	// Scrollback (only when asked for) holds up to the asked number of
	// the rows that scrolled off the top of the main screen, oldest first.
	Scrollback *[]string `json:"scrollback,omitempty"`
}

// ErrTooLarge says a terminal is larger than what is emulated.
func ErrTooLarge(cols, rows int) error {
	return fmt.Errorf("a %dx%d terminal is larger than the screen emulation's bound of %d cells (cols × rows): resize it to at most that", cols, rows, MaxCells)
}

// Drawn is lines without the blank rows at the bottom: what a person or a
// model reading a screen needs to be shown.
func Drawn(lines []string) []string {
	last := len(lines)
	for last > 0 && lines[last-1] == "" {
		last--
	}
	return lines[:last]
}

// RedrawReset starts every redraw (attach): it puts a terminal in a known
// state — the main screen, the default pen, no margins, the modes a redraw
// carries over at their defaults, blank — before the screen is drawn.
const RedrawReset = "\x1b[?1049l\x1b[0m\x1b[r\x1b[?6l\x1b[?7h\x1b[?1l\x1b>\x1b[?25h" +
	"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1004l\x1b[?1006l\x1b[?2004l\x1b[H\x1b[2J"
