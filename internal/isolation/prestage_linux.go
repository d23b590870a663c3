package isolation

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// Stage is a child stage started ahead of its job: the runner starts it
// while it waits for work, so a job's start costs no process start-up of
// ours. The stage waits on its config socket; Send hands it the job's
// configuration and its standard files (the terminal or the pipes), which the
// stage installs as fds 0–2 before it confines itself and executes the job.
type Stage struct {
	Cmd    *exec.Cmd
	conn   *os.File // our end of the config socket
	status *os.File // read end of the status pipe
	theirs []*os.File
}

// NewStage prepares `runnerPath __stage` in its own process group, with
// /dev/null as its standard files until Send gives it the job's. With
// cgroupFD ≥ 0 (an open cgroup v2 directory) the stage is born in that
// cgroup.
func NewStage(runnerPath string, cgroupFD int) (*Stage, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("stage config socket: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "stage-config")
	theirCfg := os.NewFile(uintptr(fds[1]), "stage-config-child")
	stR, stW, err := os.Pipe()
	if err != nil {
		ours.Close()
		theirCfg.Close()
		return nil, fmt.Errorf("stage status pipe: %w", err)
	}
	cmd := exec.Command(runnerPath, StageArg)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{theirCfg, stW}
	// Its own process group, in the runner's session: the runner makes
	// the job's terminal the session's controlling terminal and this group
	// its foreground. The job is then not a session leader, so its end
	// does not hang the terminal up on what it left running (a `nohup cmd &`
	// that has not yet ignored SIGHUP would die of it); the terminal hangs
	// up when the runner closes it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cgroupFD
	}
	return &Stage{Cmd: cmd, conn: ours, status: stR, theirs: []*os.File{theirCfg, stW}}, nil
}

// Start starts the stage; it then waits for Send.
func (s *Stage) Start() error {
	err := s.Cmd.Start()
	for _, f := range s.theirs {
		f.Close()
	}
	s.theirs = nil
	if err != nil {
		s.Close()
		return fmt.Errorf("start stage: %w", err)
	}
	return nil
}

// PID is the stage's pid, which becomes the job's pid at exec.
func (s *Stage) PID() int { return s.Cmd.Process.Pid }

// Send gives the stage cfg and the job's stdin, stdout and stderr. The
// files are passed as SCM_RIGHTS with the first bytes; the caller may close
// its copies afterwards.
func (s *Stage) Send(cfg StageConfig, stdio [3]*os.File) error {
	data, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode stage config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return fmt.Errorf("stage config is %d bytes, more than %d", len(data), maxConfigBytes)
	}
	fds := []int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}
	rights := unix.UnixRights(fds...)
	first := min(len(data), 4096)
	if err := unix.Sendmsg(int(s.conn.Fd()), data[:first], rights, nil, 0); err != nil {
		return fmt.Errorf("send stage config: %w", err)
	}
	if _, err := s.conn.Write(data[first:]); err != nil {
		return fmt.Errorf("send stage config: %w", err)
	}
	// End of file tells the stage the config is complete.
	if err := s.conn.Close(); err != nil {
		return fmt.Errorf("send stage config: %w", err)
	}
	s.conn = nil
	return nil
}

// Applied reads what the stage applied; it returns once the stage executed
// the job or failed.
func (s *Stage) Applied() (Applied, error) {
	defer func() { s.status.Close(); s.status = nil }()
	return ReadApplied(s.status)
}

// Close releases the stage's channels; a stage still waiting for its config
// then fails and exits.
func (s *Stage) Close() {
	for _, f := range []*os.File{s.conn, s.status} {
		if f != nil {
			f.Close()
		}
	}
	s.conn, s.status = nil, nil
}

// readStageMessage reads the stage config from the config socket, with the
// standard files the runner may pass along with its first bytes.
func readStageMessage() (StageConfig, []int, error) {
	var cfg StageConfig
	var fds []int
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(stageConfigFD, chunk, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return cfg, fds, fmt.Errorf("read stage config from fd %d: %w", stageConfigFD, err)
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return cfg, fds, fmt.Errorf("read stage files: %w", err)
			}
			for _, m := range msgs {
				got, err := unix.ParseUnixRights(&m)
				if err == nil {
					fds = append(fds, got...)
				}
			}
		}
		if n == 0 {
			break
		}
		buf = append(buf, chunk[:n]...)
		if len(buf) > maxConfigBytes {
			return cfg, fds, fmt.Errorf("stage config larger than %d bytes", maxConfigBytes)
		}
	}
	unix.Close(stageConfigFD)
	if err := json.Unmarshal(buf, &cfg); err != nil {
		return cfg, fds, fmt.Errorf("decode stage config: %w", err)
	}
	return cfg, fds, nil
}

// installStdio makes fds the stage's 0, 1 and 2. A terminal among them is
// already the session's controlling terminal, with the stage's group in the
// foreground (the runner did both).
func installStdio(fds []int) error {
	if len(fds) == 0 {
		return nil
	}
	if len(fds) != 3 {
		return fmt.Errorf("stage got %d standard files, want 3", len(fds))
	}
	for i, fd := range fds {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return fmt.Errorf("install fd %d: %w", i, err)
		}
	}
	for _, fd := range fds {
		if fd > 2 {
			unix.Close(fd)
		}
	}
	return nil
}

// configChannel is the config socket of StageCommand: a socketpair, so the
// stage reads it the same way whether or not files come along.
func configChannel() (theirs, ours *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[1]), "stage-config-child"), os.NewFile(uintptr(fds[0]), "stage-config"), nil
}
