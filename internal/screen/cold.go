package screen

import "bytes"

// The cold screen: no emulator until one is needed.
//
// An emulator costs two buffers of cols × rows cells (2.2 MB at 200×50)
// made and zeroed when the Term is, page faults as they are first touched,
// and the collections that allocation brings on; most pty jobs (a command
// that prints a few lines and ends) never draw anything an emulator is
// needed for, and the emulator's code is not even in the runner's binary
// (it is in the screen process, cmd/shellctl-screen). So a screen starts
// Cold: it keeps the bytes written so far and the screen they draw,
// computed here, and its owner makes the emulator (warm) only on the first
// byte outside the subset below, on a resize, or once more than ColdMax
// bytes were written. The emulator is then fed the kept bytes (Raw) and
// everything after, so its screen is the one feeding every byte from the
// start gives (FuzzColdSame in internal/screen/emu checks that against a
// Term emulating from the start, for any input in any writes).
//
// The subset (the cursor starts at the top left, on the main screen):
//   - printable ASCII (0x20–0x7e): written at the cursor, which moves one
//     right; on the last column it stays there, with a wrap pending that the
//     next printable character takes onto the start of the next row;
//   - CR: to the first column; LF, VT, FF: one row down, the column kept;
//     BS: one column left (none at the first); HT: to the next tab stop
//     (every 8 columns), at most the last column, a pending wrap kept;
//     CR, LF, VT, FF and BS end a pending wrap;
//   - ESC [ K and ESC [ 0 K: blank from the cursor to the end of its row,
//     ending a pending wrap;
//   - ESC [ p m with p up to 64 bytes of digits, ';' and ':' (SGR): they
//     change the pen, which the screen's text does not show;
//   - nothing that scrolls: no line feed on the bottom row, and no wrap
//     from it.
//
// Nothing in the subset sets the title, the cursor's visibility, a mode or
// the alternate screen, and nothing reaches the scrollback: a cold
// screen's are the initial ones (no title, the cursor shown, the main
// screen, normal cursor keys, no scrollback).

// ColdMax bounds the bytes a Cold screen keeps: past it the emulator is
// made and fed them.
const ColdMax = 8 << 10

// coldCSIMax bounds the parameters of a sequence kept.
const coldCSIMax = 64

// Cold is a screen without an emulator, for the subset above. The zero
// value is a blank screen. Not safe for concurrent use.
type Cold struct {
	raw  []byte   // every byte written
	rows [][]byte // the rows down to the last drawn on, cols bytes each (nil: blank)
	x, y int      // the cursor
	wrap bool     // a wrap is pending (the last column was written)
	// An escape sequence under way: esc 1 after ESC, 2 after ESC [ with
	// csi parameter bytes so far.
	esc int
	csi []byte
}

// Write follows p on a cols × rows cold screen and keeps it: false when p
// would take the kept bytes past ColdMax or a byte of it is outside the
// subset. Then the screen is spent (partly updated, p not kept): its owner
// makes the emulator and feeds it Raw, then p.
func (c *Cold) Write(p []byte, cols, rows int) bool {
	if len(c.raw)+len(p) > ColdMax || !c.take(p, cols, rows) {
		return false
	}
	c.raw = append(c.raw, p...)
	return true
}

// Raw is every byte kept so far.
func (c *Cold) Raw() []byte { return c.raw }

// take follows p on the cold screen: false when a byte of it is outside
// the subset (then the cold screen is partly updated and must be dropped).
func (c *Cold) take(p []byte, cols, rows int) bool {
	for _, b := range p {
		switch c.esc {
		case 1:
			if b != '[' {
				return false
			}
			c.esc, c.csi = 2, c.csi[:0]
			continue
		case 2:
			switch {
			case b >= '0' && b <= '9' || b == ';' || b == ':':
				if len(c.csi) == coldCSIMax {
					return false
				}
				c.csi = append(c.csi, b)
			case b == 'm':
				c.esc = 0
			case b == 'K' && (len(c.csi) == 0 || string(c.csi) == "0"):
				c.esc = 0
				if c.y < len(c.rows) && c.rows[c.y] != nil {
					r := c.rows[c.y]
					for i := c.x; i < cols; i++ {
						r[i] = ' '
					}
				}
				c.wrap = false
			default:
				return false
			}
			continue
		}
		switch {
		case b >= 0x20 && b <= 0x7e:
			if c.wrap {
				if c.y == rows-1 {
					return false
				}
				c.y++
				c.x = 0
			}
			for len(c.rows) <= c.y {
				c.rows = append(c.rows, nil)
			}
			if c.rows[c.y] == nil {
				c.rows[c.y] = bytes.Repeat([]byte{' '}, cols)
			}
			c.rows[c.y][c.x] = b
			c.wrap = c.x >= cols-1
			if !c.wrap {
				c.x++
			}
		case b == '\r':
			c.x, c.wrap = 0, false
		case b == '\n' || b == '\v' || b == '\f':
			if c.y == rows-1 {
				return false
			}
			c.y++
			c.wrap = false
		case b == '\b':
			c.x, c.wrap = max(0, c.x-1), false
		case b == '\t':
			c.x = min((c.x/8+1)*8, cols-1)
		case b == 0x1b:
			c.esc = 1
		default:
			return false
		}
	}
	return true
}

// Snapshot is the cold screen of a cols × rows terminal, as the API
// answers it (scrollback as in emu.Term.Snapshot: none is ever kept).
func (c *Cold) Snapshot(cols, rows, scrollback int) Snapshot {
	s := Snapshot{
		Cols: cols, Rows: rows,
		Cursor: Cursor{Row: c.y, Col: c.x, Visible: true},
		Lines:  make([]string, rows),
	}
	for y, r := range c.rows {
		if r != nil {
			s.Lines[y] = string(bytes.TrimRight(r, " "))
		}
	}
	if scrollback > 0 {
		l := []string{}
		s.Scrollback = &l
	}
	return s
}

// Footprint is what the cold screen holds in memory, in bytes: at most
// ColdMax bytes kept and the rows they drew (cols × rows bytes).
func (c *Cold) Footprint() int64 {
	n := int64(cap(c.raw) + cap(c.csi) + 24*len(c.rows))
	for _, r := range c.rows {
		n += int64(cap(r))
	}
	return n
}
