package emu

// The emulator's state that it does not export and the fast paths depend
// on, read in place (reflect finds the fields once; TestEmulatorState
// guards that they are found). Reading it rather than following the bytes
// alongside the emulator cannot disagree with it: a byte the emulator
// takes into a UTF-8 character, a C1 control or a sequence it reads its
// own way is read as it read it.

import (
	"reflect"
	"unsafe"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
	"github.com/charmbracelet/x/vt"
)

type emuState struct {
	parser   *byte            // the parser's state
	modes    *ansi.Modes      // the terminal modes
	gl       *int             // the character set in GL (SO/SI, LS2, LS3)
	charsets *[4]vt.CharSet   // G0…G3 (nil: ASCII)
	scroll   [2]*uv.Rectangle // each screen's scroll region
	bufs     [2]*uv.RenderBuffer
	phantom  *bool // the cursor is past the last column: the next character wraps first
}

func field(v reflect.Value, name string, want reflect.Type) unsafe.Pointer {
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return nil
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Type() != want {
		return nil
	}
	return unsafe.Pointer(f.UnsafeAddr())
}

// stateOf finds the fields of e; ok is false when any is missing (then
// the fast paths are off).
func stateOf(e *vt.Emulator) (s emuState, ok bool) {
	v := reflect.ValueOf(e).Elem()
	pp := field(v, "parser", reflect.TypeOf((*ansi.Parser)(nil)))
	if pp == nil || *(**ansi.Parser)(pp) == nil {
		return s, false
	}
	s.parser = (*byte)(field(reflect.ValueOf(*(**ansi.Parser)(pp)).Elem(), "state", reflect.TypeOf(byte(0))))
	s.modes = (*ansi.Modes)(field(v, "modes", reflect.TypeOf(ansi.Modes{})))
	s.gl = (*int)(field(v, "gl", reflect.TypeOf(0)))
	s.charsets = (*[4]vt.CharSet)(field(v, "charsets", reflect.TypeOf([4]vt.CharSet{})))
	s.phantom = (*bool)(field(v, "atPhantom", reflect.TypeOf(false)))
	scrs := v.FieldByName("scrs")
	if !scrs.IsValid() || scrs.Kind() != reflect.Array || scrs.Len() != 2 {
		return s, false
	}
	for i := range 2 {
		s.scroll[i] = (*uv.Rectangle)(field(scrs.Index(i), "scroll", reflect.TypeOf(uv.Rectangle{})))
		b := field(scrs.Index(i), "buf", reflect.TypeOf((*uv.RenderBuffer)(nil)))
		if b == nil || s.scroll[i] == nil {
			return s, false
		}
		s.bufs[i] = *(**uv.RenderBuffer)(b)
	}
	ok = s.parser != nil && s.modes != nil && s.gl != nil && s.charsets != nil && s.phantom != nil
	return s, ok
}

func (s *emuState) mode(m ansi.Mode) bool {
	set, ok := (*s.modes)[m]
	return ok && set.IsSet()
}

// ground: the parser is between sequences and characters.
func (s *emuState) ground() bool { return *s.parser == parser.GroundState }

// fullRegion: screen i scrolls as a whole (no top/bottom or left/right
// margins, no origin mode).
func (s *emuState) fullRegion(i, cols, rows int) bool {
	return *s.scroll[i] == uv.Rect(0, 0, cols, rows) && !s.mode(ansi.ModeLeftRightMargin) && !s.mode(ansi.ModeOrigin)
}

// atPhantom: the cursor is in the last column with a wrap pending (the
// row is full; the next character goes to the start of the next row).
func (s *emuState) atPhantom() bool { return *s.phantom }

// plainText: printable ASCII prints as itself, wrapping at the margin.
func (s *emuState) plainText() bool {
	return *s.gl == 0 && s.charsets[0] == nil && s.mode(ansi.ModeAutoWrap)
}
