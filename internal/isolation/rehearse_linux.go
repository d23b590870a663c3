package isolation

import "golang.org/x/sys/unix"

// rehearsal is the job a stage rehearses while it waits (rehearse): the
// default lists, a script and a terminal that exist on every system, and
// an environment with a PATH to look the shell up in.
var rehearsal = stageRequest{
	TTY: true,
	Config: JobConfig{
		Argv:   []string{"sh", "/dev/null"},
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=/", "TERM=xterm-256color"},
		Cwd:    "/",
		Home:   "/",
		Script: "/dev/null",
		TTY:    "/dev/null",
		Policy: Policy{Enabled: true},
	},
}

// rehearsalFilter is a seccomp program of one instruction (return
// allow), for the rehearsal's plan: it is never installed.
var rehearsalFilter = [8]byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f}

// rehearse runs, once and before the stage waits for its job, what a job's
// start runs after it arrives, on a job of its own (rehearsal): the
// request decoded, the Landlock ruleset of the default lists made and
// closed (never enforced: nothing is confined), the answer encoded and the
// program looked up. A fresh Go process pays for every first time — its
// stack grown, its code and heap pages touched, each a page fault — and a
// page fault can cost tens of microseconds in a virtual machine; paid here,
// they are off the job's path: the stage is started ahead of need, and the
// job's own start then runs on pages already there. Nothing of it is kept
// but the memory (a few KiB), and a rehearsal that fails changes nothing:
// the job's own start checks everything again. It returns the domain it
// built, for tests.
func rehearse() (Applied, error) {
	req, err := decodeStageRequest(encodeStageRequest(&rehearsal))
	if err != nil {
		return Applied{}, err
	}
	cfg := &req.Config
	a, err := buildDomain(cfg, -1, -1, func(int) error { return nil })
	_ = appendAppliedReply(nil, &a)
	if _, lerr := lookProgram(cfg.Argv[0], cfg.Env); err == nil {
		err = lerr
	}
	// The walls' plan, made and dropped (nothing is applied): its code
	// and the capability calls paid here, not on the job's path.
	_, _ = planWalls(&Walls{LimitCaps: true, KeepCaps: DefaultCapMask(), Seccomp: rehearsalFilter[:]})
	return a, err
}

// rehearseUnlessAsked rehearses (rehearse) unless the job is already
// waiting on sock: a stage started when its job came (none was ready, or
// --warm-runners 0) has nothing to gain from paying first-time costs
// twice. It reports whether it rehearsed.
func rehearseUnlessAsked(sock int) bool {
	pfd := []unix.PollFd{{Fd: int32(sock), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n > 0 {
			return false // the request (or the runner's end) is there
		}
		break
	}
	_, _ = rehearse()
	return true
}
