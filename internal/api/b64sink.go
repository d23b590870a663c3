package api

// input's base64, decoded as the body is read.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// b64Sink is the sink of an /input body's base64: it decodes standard
// base64 as it is written, so the request holds the decoded bytes alone
// (three quarters of the text), within the body's reservation (held), and
// never the text and its bytes at once. It takes what
// base64.StdEncoding.DecodeString takes (CR and LF anywhere are skipped;
// padding ends the data) and refuses what it refuses; a refusal is kept,
// the rest of the body still read, and told by Bytes.
type b64Sink struct {
	out   []byte
	hint  int64 // the body's length: out is made once for what it can decode to
	grp   [4]byte
	ngrp  int   // characters of a group not yet whole
	chars int64 // characters decoded or held so far (CR and LF not counted)
	ended bool  // a group with padding was decoded: nothing may follow
	err   error
	strip []byte // scratch: a write with its CRs and LFs taken out
}

func (s *b64Sink) Reset() error {
	*s = b64Sink{out: s.out[:0], hint: s.hint, strip: s.strip[:0]}
	return nil
}

func (s *b64Sink) Write(p []byte) (int, error) {
	if s.err == nil {
		s.err = s.write(p)
	}
	return len(p), nil
}

func (s *b64Sink) write(p []byte) error {
	if bytes.IndexByte(p, '\n') >= 0 || bytes.IndexByte(p, '\r') >= 0 {
		s.strip = s.strip[:0]
		for _, c := range p {
			if c != '\n' && c != '\r' {
				s.strip = append(s.strip, c)
			}
		}
		p = s.strip
	}
	for len(p) > 0 {
		if s.ended {
			return corruptAt(s.chars)
		}
		if s.ngrp > 0 || len(p) < 4 {
			k := copy(s.grp[s.ngrp:], p)
			s.ngrp += k
			p = p[k:]
			if s.ngrp < 4 {
				s.chars += int64(k)
				return nil
			}
			s.ngrp = 0
			s.chars += int64(k) - 4
			if err := s.decode(s.grp[:]); err != nil {
				return err
			}
			continue
		}
		whole := len(p) &^ 3
		if err := s.decode(p[:whole]); err != nil {
			return err
		}
		p = p[whole:]
	}
	return nil
}

// decode decodes q, whole groups of four, after what out holds; chars
// counts the characters before q.
func (s *b64Sink) decode(q []byte) error {
	if s.out == nil && s.hint > 0 {
		s.out = make([]byte, 0, s.hint/4*3+3)
	}
	at, most := len(s.out), len(q)/4*3
	if cap(s.out)-at < most {
		s.out = append(s.out[:cap(s.out)], make([]byte, at+most-cap(s.out))...)
	}
	n, err := base64.StdEncoding.Decode(s.out[at:at+most], q)
	s.out = s.out[:at+n]
	var bad base64.CorruptInputError
	if errors.As(err, &bad) {
		return corruptAt(s.chars + int64(bad))
	}
	if err != nil {
		return err
	}
	s.chars += int64(len(q))
	if n < most {
		s.ended = true // padding: the data ended
	}
	return nil
}

// Bytes is the decoded bytes, or why the text is not base64.
func (s *b64Sink) Bytes() ([]byte, error) {
	if s.err == nil && s.ngrp > 0 {
		return nil, corruptAt(s.chars - int64(s.ngrp))
	}
	return s.out, s.err
}

func corruptAt(i int64) error {
	return fmt.Errorf("illegal base64 data at character %d (line ends not counted)", i)
}
