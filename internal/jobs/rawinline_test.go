package jobs

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/runner/proto"
)

// TestAttachRawFromInlinedEvent: raw bytes an out event carried (the
// runner inlines small growth while a client is attached) are answered
// from memory, with no request to the runner, as a copy a later event
// does not change; an offset the last event's bytes do not cover still
// asks the runner.
func TestAttachRawFromInlinedEvent(t *testing.T) {
	s := newTestService(t)
	j := addLivePTY(t, s, "job1")
	theirs := runnerPair(t, s, j)
	var asked atomic.Int64
	go func() {
		for {
			m, err := theirs.Recv()
			if err != nil {
				return
			}
			if m.T == proto.TRaw {
				asked.Add(1)
				theirs.Send(&proto.Msg{T: proto.TAck, ID: m.ID, Data: []byte("from the runner"), RawSize: m.RawSize})
			}
		}
	}()
	event := func(size int64, data string) {
		t.Helper()
		if err := theirs.Send(&proto.Msg{T: proto.TOutput, RawSize: size, Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(5 * time.Second)
		for {
			j.mu.Lock()
			got, changed := j.rawSize, j.changed
			j.mu.Unlock()
			if got >= size {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("the event with raw size %d was not applied (raw size %d)", size, got)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	read := func(off int64) []byte {
		t.Helper()
		b, err := s.AttachRaw(ctx, "job1", off)
		if err != nil {
			t.Fatalf("AttachRaw(%d): %v", off, err)
		}
		return b
	}

	event(110, "0123456789") // raw bytes 100..110
	first := read(103)
	if string(first) != "3456789" || asked.Load() != 0 {
		t.Fatalf("AttachRaw(103) after an event carrying 100..110: %q with %d requests to the runner, want \"3456789\" and none", first, asked.Load())
	}
	if b := read(100); string(b) != "0123456789" || asked.Load() != 0 {
		t.Fatalf("AttachRaw(100): %q with %d requests, want the whole chunk and none", b, asked.Load())
	}

	event(115, "abcde") // raw bytes 110..115
	if string(first) != "3456789" {
		t.Fatalf("bytes handed out changed under a later event: %q", first)
	}
	if b := read(112); string(b) != "cde" || asked.Load() != 0 {
		t.Fatalf("AttachRaw(112): %q with %d requests, want \"cde\" and none", b, asked.Load())
	}
	// 105 is in the chunk before, no longer in the last one; 115 is its
	// end (nothing newer known here): both are the runner's to answer.
	for i, off := range []int64{105, 115} {
		if b := read(off); !bytes.Equal(b, []byte("from the runner")) || asked.Load() != int64(i+1) {
			t.Fatalf("AttachRaw(%d) outside the inlined bytes: %q with %d requests, want the runner's answer (%d requests)", off, b, asked.Load(), i+1)
		}
	}
}
