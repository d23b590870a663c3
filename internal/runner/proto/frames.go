package proto

// Frames: a message whose Data is bytes (input for the job, the terminal's
// raw output) sent as they are rather than as base64 inside the JSON line.
// A stream through attach moves every byte of it through the control
// channel, and base64 cost each byte an encoding on one side, a decoding
// on the other, a third more to write and read, and a fresh slice to
// decode into, which the Go runtime cleared, collected and gave back to
// the system again and again.
//
// A frame is
//
//	0x00, the header's length and Data's length (4 bytes each, big-endian),
//	the header: the message's JSON line without "data", newline included,
//	Data's bytes.
//
// No JSON line starts with 0x00, so a reader tells the two apart by the
// first byte. A frame goes only to a peer that said it reads them (Frames
// in a message of its own): a server and a runner of different builds
// (a runner kept across a server's upgrade) speak JSON lines to each
// other until then.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

const (
	frameMark   = 0x00
	framePrefix = 9
)

// appendFrame writes m as a frame after b.
func appendFrame(b []byte, m *Msg) ([]byte, error) {
	start := len(b)
	b = append(b, make([]byte, framePrefix)...)
	h := *m
	h.Data, h.buf = nil, nil
	b, err := appendMsg(b, &h)
	if err != nil {
		return b, err
	}
	hlen := len(b) - start - framePrefix
	b = append(b, m.Data...)
	b[start] = frameMark
	binary.BigEndian.PutUint32(b[start+1:], uint32(hlen))
	binary.BigEndian.PutUint32(b[start+5:], uint32(len(m.Data)))
	return b, nil
}

// recvFrame reads the frame that starts at rpos. Its Data is read
// straight from the socket into a buffer of dataPools (Release gives it
// back), not through rbuf.
func (c *Conn) recvFrame() (*Msg, error) {
	if err := c.fill(framePrefix); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	p := c.rbuf[c.rpos:]
	hlen := int64(binary.BigEndian.Uint32(p[1:]))
	dlen := int64(binary.BigEndian.Uint32(p[5:]))
	if hlen < 2 || hlen+dlen > int64(c.max) {
		return nil, fmt.Errorf("control frame of a %d-byte header and %d bytes of data: longer than %d bytes in all, or no header", hlen, dlen, c.max)
	}
	c.rpos += framePrefix
	line, err := c.readLine()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if int64(len(line)) != hlen {
		return nil, fmt.Errorf("control frame: its header says %d bytes, its JSON line is %d", hlen, len(line))
	}
	m := new(Msg)
	ok := decodeMsg(line, m)
	if !ok || m.Data != nil {
		c.shrink()
		return nil, fmt.Errorf("decode control frame's header (%d bytes): not a JSON object with the protocol's fields and no data", len(line))
	}
	if dlen > 0 {
		d, buf, err := c.readData(int(dlen))
		if err != nil {
			return nil, err
		}
		m.Data, m.buf = d, buf
	}
	c.shrink()
	if m.Frames {
		c.peerFrames.Store(true)
	}
	return m, nil
}

// dataStep is the most a frame's Data is given room for beyond what has
// arrived: memory follows the bytes read, never only what a header claims.
const dataStep = 256 << 10

// readData reads the n bytes of a frame's Data: what rbuf holds, then
// straight from the socket. Its buffer grows as the bytes come (in the
// common case, a Data under dataStep or already arrived, it is the first).
func (c *Conn) readData(n int) ([]byte, *[]byte, error) {
	d, buf := getData(min(n, c.rend-c.rpos+dataStep))
	k := copy(d, c.rbuf[c.rpos:c.rend])
	c.rpos += k
	for k < n {
		if k == len(d) {
			nd, nbuf := getData(min(n, 2*len(d)))
			copy(nd, d)
			putData(buf)
			d, buf = nd, nbuf
		}
		r, err := c.c.Read(d[k:])
		k += r
		if r > 0 {
			continue
		}
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		putData(buf)
		return nil, nil, err
	}
	return d, buf, nil
}

// Data buffers of frames, in classes of powers of two from 8 KiB to
// 2 MiB (an input is at most 1 MiB): Data of a size seen before is read
// into memory read into before.
const (
	minPooledData = 8 << 10
	maxPooledData = 2 << 20
)

// dataPools[i] holds buffers of minPooledData<<i bytes.
var dataPools [9]sync.Pool // 8 KiB … 2 MiB

func dataClass(n int) int { return bits.Len(uint(n-1)) - bits.Len(minPooledData-1) }

// getData is a slice of n bytes, and the pooled buffer it lies in (nil
// for a short or very long one, made for it).
func getData(n int) ([]byte, *[]byte) {
	if n <= minPooledData/2 || n > maxPooledData {
		return make([]byte, n), nil
	}
	n0 := max(n, minPooledData)
	cl := dataClass(n0)
	if p, ok := dataPools[cl].Get().(*[]byte); ok {
		return (*p)[:n], p
	}
	b := make([]byte, minPooledData<<cl)
	return b[:n], &b
}

func putData(p *[]byte) {
	if p == nil {
		return
	}
	*p = (*p)[:cap(*p)]
	dataPools[dataClass(cap(*p))].Put(p)
}

// Release gives the buffer m's Data was read into back for reuse; m.Data
// is nil after it. For one who is done with the bytes (written to the
// job, copied out), on a message Recv returned; a no-op on any other.
func (m *Msg) Release() {
	if m != nil && m.buf != nil {
		putData(m.buf)
		m.buf = nil
		m.Data = nil
	}
}

// PeerReadsFrames reports whether messages with Data go to the peer as
// frames (it said it reads them).
func (c *Conn) PeerReadsFrames() bool { return c.peerFrames.Load() }
