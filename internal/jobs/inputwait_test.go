package jobs

import (
	"testing"

	"github.com/shellctl/shellctl/internal/runner/proto"
	"github.com/shellctl/shellctl/internal/store"
)

// TestInputWaitCountsOnlyStatesAfterEveryInput: the runner's "waiting"
// counts only when it accounts for every input the server sent (a state
// seen before the runner wrote the last input is of a read that has not
// read it); stdio and finished jobs never wait; each change wakes waiters.
func TestInputWaitCountsOnlyStatesAfterEveryInput(t *testing.T) {
	s := &Service{}
	j := newJob("j1", "/nowhere", "pty")
	j.status = store.StatusRunning
	woken := func(f func()) bool {
		ch := j.look().changed
		f()
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if j.look().inputWait {
		t.Fatal("a new job waits")
	}
	if !woken(func() { s.applyInputWait(j, &proto.Msg{T: proto.TInputWait, Waiting: true, InputSeq: 0, Size: 6}) }) {
		t.Fatal("the state's change did not wake waiters")
	}
	if sn := j.look(); !sn.inputWait || sn.size != 6 {
		t.Fatalf("after the runner said waiting: %+v", sn)
	}
	// Input 1 acknowledged: the state of before it no longer counts.
	j.inputAcked(1)
	if j.look().inputWait {
		t.Fatal("a waiting state from before input 1 still counts after it was sent")
	}
	s.applyInputWait(j, &proto.Msg{T: proto.TInputWait, Waiting: false, InputSeq: 1, Size: 10})
	s.applyInputWait(j, &proto.Msg{T: proto.TInputWait, Waiting: true, InputSeq: 1, Size: 20})
	if sn := j.look(); !sn.inputWait || sn.size != 20 {
		t.Fatalf("waiting again after input 1: %+v", sn)
	}
	if !j.view().InputWait {
		t.Fatal("the job view does not show it")
	}
	j.inputAcked(0) // an older number changes nothing
	if !j.look().inputWait {
		t.Fatal("an older input number undid the state")
	}
	j.mu.Lock()
	j.status = store.StatusExited
	j.mu.Unlock()
	if j.look().inputWait {
		t.Fatal("a finished job waits")
	}
	st := newJob("j2", "/nowhere", "stdio")
	st.status = store.StatusRunning
	s.applyInputWait(st, &proto.Msg{T: proto.TInputWait, Waiting: true})
	if st.look().inputWait {
		t.Fatal("a stdio job waits")
	}
}
