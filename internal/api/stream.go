package api

// GET /v1/jobs/{id}/stream: the live output stream as Server-Sent Events
// (spec/extended-api.md §1). This file is the HTTP side only: the framing
// of events, the query and the connection's keep-alive. What the job is
// and how far its file may be read is the jobs service's Follower; the cut
// of bytes into text and base64 chunks is outputlog.Split.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/shellctl/shellctl/internal/httperr"
	"github.com/shellctl/shellctl/internal/jobs"
	"github.com/shellctl/shellctl/internal/outputlog"
)

// StreamKeepAlive is the longest a stream stays silent: an idle stream
// sends a ": keep-alive" comment this often (tests shorten it).
var StreamKeepAlive = 15 * time.Second

// streamRead is the most one stream reads from the file at a time: with
// the event built from it (at most six times as big for text made of
// control bytes), what one stream holds in memory whatever its reader's
// pace.
const streamRead = 64 << 10

// follower is what a stream needs of the job (jobs.Follower).
type follower interface {
	State(ctx context.Context) (jobs.FollowState, error)
	ReadAt(p []byte, off int64) (int, error)
	End(ctx context.Context) (*jobs.FollowEnd, error)
}

// streamStop is closed when the server shuts down: streams end then, so
// they never hold a shutdown (clients resume with Last-Event-ID).
type streamStop struct {
	once sync.Once
	ch   chan struct{}
}

func (s *Server) stopCh() chan struct{} {
	s.streams.once.Do(func() { s.streams.ch = make(chan struct{}) })
	return s.streams.ch
}

// StopStreams ends every open stream (the server is shutting down).
func (s *Server) StopStreams() {
	ch := s.stopCh()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	raw, from := q.Get("offset"), "offset"
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		raw, from = h, "Last-Event-ID"
	}
	var off int64
	if raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			httperr.Write(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("%s %q is not a byte offset: give a whole number ≥ 0", from, raw))
			return
		}
		off = n
	}
	channel := q.Get("channel")
	switch channel {
	case "":
		channel = jobs.ChannelOutput
	case jobs.ChannelOutput, jobs.ChannelStderr:
	default:
		validation(w, "channel %q is not one of \"output\", \"stderr\"", channel)
		return
	}
	ctx := r.Context()
	fw, err := s.Jobs.Follow(ctx, id, channel)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	defer fw.Close()
	st, err := fw.State(ctx)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	// A live job's size events may lag its file by a write.
	if off > st.Size && (st.Done || off > fw.DiskSize()) {
		httperr.Write(w, http.StatusBadRequest, "invalid_offset", fmt.Sprintf("%s %d is past the end of the %s (%d bytes)", from, off, channel, max(st.Size, fw.DiskSize())))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = serveStream(ctx, w, fw, off, s.stopCh())
}

// serveStream sends fw's events from off until the end event, the
// client leaving, or stop. It returns why it stopped (nil after end).
//
// Nothing polls: between reads it waits on the job's change channel (size
// events, status), the keep-alive timer, the client and stop. Reads are
// at most streamRead bytes, made when the last events are written (and
// so at the client's pace: a reader that stops reading blocks this
// handler, never the job), and each batch is flushed before any wait.
func serveStream(ctx context.Context, w http.ResponseWriter, fw follower, off int64, stop <-chan struct{}) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, streamRead)
	var ev []byte
	var chunks []outputlog.Chunk
	lastStatus := ""
	var lastWait *bool
	ka := time.NewTimer(StreamKeepAlive)
	defer ka.Stop()
	send := func() error {
		if len(ev) == 0 {
			return nil
		}
		if _, err := w.Write(ev); err != nil {
			return fmt.Errorf("write stream: %w", err)
		}
		ev = ev[:0]
		if err := rc.Flush(); err != nil {
			return fmt.Errorf("flush stream: %w", err)
		}
		ka.Reset(StreamKeepAlive)
		return nil
	}
	for {
		st, err := fw.State(ctx)
		if err != nil {
			return err
		}
		if lastStatus == "" {
			// The first event says where the job stands.
			ev = appendState(ev, st)
			lastStatus = st.Status
		}
		for off < st.Size {
			n := int(min(int64(len(buf)), st.Size-off))
			if _, err := fw.ReadAt(buf[:n], off); err != nil {
				return err
			}
			final := st.Done && off+int64(n) == st.Size
			var used int
			chunks, used = outputlog.Split(chunks[:0], buf[:n], off, final)
			for _, c := range chunks {
				ev = appendOutput(ev, c)
			}
			if err := send(); err != nil {
				return err
			}
			off += int64(used)
			if used == 0 {
				break // an incomplete character at the end: wait for the rest
			}
		}
		// A change is told after the bytes written before it was seen
		// (the prompt before "waiting", the last output before "exited").
		if st.Status != lastStatus {
			ev = appendState(ev, st)
			lastStatus = st.Status
		}
		if st.InputWait != nil && (lastWait == nil || *lastWait != *st.InputWait) {
			ev = appendInputWait(ev, *st.InputWait)
			v := *st.InputWait
			lastWait = &v
		}
		if st.Done {
			end, err := fw.End(ctx)
			if err != nil {
				return err
			}
			ev = appendEnd(ev, end, max(off, st.Size))
			return send()
		}
		if err := send(); err != nil {
			return err
		}
		select {
		case <-st.Changed:
		case <-ka.C:
			ev = append(ev, ": keep-alive\n\n"...)
			if err := send(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return fmt.Errorf("server shutting down")
		}
	}
}

// appendOutput frames one chunk as an output event: id is the offset just
// after it, data its start and the text (or base64 of the bytes).
func appendOutput(ev []byte, c outputlog.Chunk) []byte {
	ev = append(ev, "event: output\nid: "...)
	ev = strconv.AppendInt(ev, c.Offset+int64(len(c.Data)), 10)
	ev = append(ev, "\ndata: {\"offset\":"...)
	ev = strconv.AppendInt(ev, c.Offset, 10)
	if c.Text {
		ev = append(ev, ",\"text\":"...)
		// The JobResult's encoder (shapes.go); the chunk is valid UTF-8
		// and is not touched while it is appended.
		ev = appendBytes(ev, c.Data)
	} else {
		ev = append(ev, ",\"base64\":\""...)
		ev = base64.StdEncoding.AppendEncode(ev, c.Data)
		ev = append(ev, '"')
	}
	return append(ev, "}\n\n"...)
}

type stateEvent struct {
	Status   string `json:"status"`
	Done     bool   `json:"done"`
	ExitCode *int   `json:"exit_code"`
}

func appendState(ev []byte, st jobs.FollowState) []byte {
	return appendEvent(ev, "state", stateEvent{Status: st.Status, Done: st.Done, ExitCode: st.ExitCode})
}

// appendInputWait frames the input_wait event (spec §4): the one place
// it is made, sent whenever the job's input-wait flag changes.
func appendInputWait(ev []byte, waiting bool) []byte {
	return appendEvent(ev, "input_wait", struct {
		Waiting bool `json:"waiting"`
	}{waiting})
}

type endEvent struct {
	Status   string  `json:"status"`
	ExitCode *int    `json:"exit_code"`
	Signal   *string `json:"signal"`
	Reason   *string `json:"reason"`
	Offset   int64   `json:"offset"`
}

func appendEnd(ev []byte, e *jobs.FollowEnd, size int64) []byte {
	return appendEvent(ev, "end", endEvent{Status: e.Status, ExitCode: e.ExitCode, Signal: e.Signal, Reason: e.Reason, Offset: size})
}

func appendEvent(ev []byte, name string, v any) []byte {
	b, _ := json.Marshal(v)
	ev = append(ev, "event: "...)
	ev = append(ev, name...)
	ev = append(ev, "\ndata: "...)
	ev = append(ev, b...)
	return append(ev, "\n\n"...)
}
