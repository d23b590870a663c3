package main

// The screen verbs: screen prints what a pty job's terminal shows, keys
// types keys on it and prints the screen once the program has settled
// (docs/api.md "Screen and keys").

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shellctl/shellctl/internal/client"
	"github.com/shellctl/shellctl/internal/screen"
)

// maxScrollback is the most scrollback rows the server keeps and answers.
const maxScrollback = screen.ScrollbackLines

func checkScrollback(n int) error {
	if n < 0 || n > maxScrollback {
		return &usageError{fmt.Sprintf("--scrollback %d is not within 0..%d: give how many earlier rows to print (0 for none)", n, maxScrollback)}
	}
	return nil
}

func screenCmd(cf *clientFlags) *cobra.Command {
	var scrollback int
	c := &cobra.Command{
		Use:   "screen [--scrollback N] JOB_ID",
		Short: "Print what a pty job's terminal shows (for less, vim, top, curses programs)",
		Long: `Print the screen of a pty job's terminal as its emulator renders it: a header
line (size, cursor row,col from 0, main or alternate screen, title), then one
line per row, top to bottom, with the blank rows at the bottom left out. With
--scrollback N, up to N rows that scrolled off the top come first, then a line
"--- screen ---". --json prints the API's answer instead. A finished job
shows its last screen; a stdio job has none (an error, exit 125).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScrollback(scrollback); err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			sc, err := c.Screen(cmd.Context(), args[0], scrollback)
			if err != nil {
				return err
			}
			cf.print(sc, func() { writeScreen(os.Stdout, sc) })
			return nil
		},
	}
	c.Flags().IntVar(&scrollback, "scrollback", 0, fmt.Sprintf("also print up to N rows that scrolled off the top (0..%d)", maxScrollback))
	return c
}

func keysCmd(cf *clientFlags) *cobra.Command {
	var scrollback int
	var timeout, quiet optSeconds
	c := &cobra.Command{
		Use:   "keys JOB_ID KEY...",
		Short: "Type keys on a pty job's terminal, then print its screen once the program settled",
		Long: `Type keys on a running pty job's terminal, in order, then print its screen (as
shellctl screen does) once the program has settled: it reads its terminal
again, or has been quiet for --quiet, at the latest after --timeout. Each KEY
is a key name (Enter, Escape, Tab, Up, Down, PageDown, F5, C-c, M-b …; the
names are case-sensitive, see docs/api.md, "Screen and keys") or literal text
(":wq", "q", "hello world").

  shellctl keys "$id" Escape :wq Enter
  shellctl keys "$id" Down Down Enter`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: completeJobIDs(cf),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScrollback(scrollback); err != nil {
				return err
			}
			r := client.KeysRequest{Keys: args[1:], Scrollback: scrollback}
			for _, f := range []struct {
				name string
				v    *optSeconds
				hi   float64
				dst  *int
			}{{"--timeout", &timeout, 60, &r.TimeoutMS}, {"--quiet", &quiet, 5, &r.QuietMS}} {
				if !f.v.set {
					continue
				}
				if f.v.v < 0.001 || f.v.v > f.hi {
					return &usageError{fmt.Sprintf("%s %g is not within 0.001..%g seconds", f.name, f.v.v, f.hi)}
				}
				*f.dst = max(int(f.v.v*1000), 1)
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			sc, err := c.Keys(cmd.Context(), args[0], r)
			if err != nil {
				return err
			}
			cf.print(sc, func() { writeScreen(os.Stdout, sc) })
			return nil
		},
	}
	c.Flags().IntVar(&scrollback, "scrollback", 0, fmt.Sprintf("also print up to N rows that scrolled off the top (0..%d)", maxScrollback))
	c.Flags().Var(&timeout, "timeout", "the longest to wait for the program to settle, in seconds (0.001..60; default the server's, 3)")
	c.Flags().Var(&quiet, "quiet", "settled after this long without output, in seconds (0.001..5; default the server's, 0.1)")
	return c
}

// writeScreen prints a screen for a person: the header line, the
// scrollback when asked for, the rows without the blank ones at the bottom.
func writeScreen(w io.Writer, sc *client.Screen) {
	var b strings.Builder
	fmt.Fprintf(&b, "screen %dx%d cursor %d,%d", sc.Cols, sc.Rows, sc.Cursor.Row, sc.Cursor.Col)
	if !sc.Cursor.Visible {
		b.WriteString(" hidden")
	}
	if sc.AltScreen {
		b.WriteString(" alt-screen")
	} else {
		b.WriteString(" main-screen")
	}
	if sc.Title != "" {
		fmt.Fprintf(&b, " title %q", sc.Title)
	}
	b.WriteString("\n")
	if sc.Scrollback != nil {
		for _, l := range *sc.Scrollback {
			b.WriteString(l + "\n")
		}
		b.WriteString("--- screen ---\n")
	}
	for _, l := range screen.Drawn(sc.Lines) {
		b.WriteString(l + "\n")
	}
	io.WriteString(w, b.String())
}
