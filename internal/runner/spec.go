// Package runner is what shellctl-runner does for one job: start the job's
// process (in a terminal or with pipes), confined for it, copy its
// output to disk, end its process tree on request or at a limit, and publish
// how it ended — to the server over the control channel, and to the database
// itself when no server is there to hear it.
package runner

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/shellctl/shellctl/internal/isolation"
	"github.com/shellctl/shellctl/internal/jsonstr"
)

// Files of a job directory.
const (
	ScriptFile = "script"
	OutputFile = "output.log"
	StderrFile = "stderr.log"
	SocketFile = "ctl.sock"
)

// Spec is everything a runner needs to run one job, sent by the server in
// the assign message. Every default is already
// filled in: the runner decides nothing the server could have decided.
type Spec struct {
	ID       string `json:"id"`
	StateDir string `json:"state_dir"`
	Dir      string `json:"dir"`
	Mode     string `json:"mode"` // "pty" or "stdio"
	// ControlKey authenticates connections to the control socket.
	ControlKey string   `json:"control_key"`
	Argv       []string `json:"argv"` // what the job executes
	Env        []string `json:"env"`
	Cwd        string   `json:"cwd"`
	Home       string   `json:"home"`
	Cols       int      `json:"cols"`
	Rows       int      `json:"rows"`

	Policy isolation.Policy `json:"policy"`
	// ForceIsolationFail makes the job's confinement fail with this message
	// (a test hook set only from the server's own configuration).
	ForceIsolationFail string `json:"force_isolation_fail,omitempty"`
	// BenchNoScreen keeps a pty job without its screen emulator: the
	// floor of the bench's "pty non-line output" row (the same job with
	// the screen against without it). Set only from the server's own
	// configuration (SHELLCTL_BENCH_NO_SCREEN); such a job's screen
	// requests see only what came after them.
	BenchNoScreen bool `json:"bench_no_screen,omitempty"`
	// Walls: the job's capabilities, seccomp filter and IPC namespace,
	// as the server decided them from its flags.
	Walls isolation.Walls `json:"walls"`

	MaxRuntimeSeconds float64 `json:"max_runtime_seconds,omitempty"` // 0 = no limit
	MaxOutputBytes    int64   `json:"max_output_bytes,omitempty"`    // 0 = no limit

	// Stdin is StdinPipe for a stdio job whose stdin is a pipe the runner
	// holds (stdin.go); otherwise a stdio job's stdin is /dev/null.
	Stdin string `json:"stdin,omitempty"`
}

// JobDir is the directory of job id under stateDir.
func JobDir(stateDir, id string) string { return filepath.Join(stateDir, "jobs", id) }

// decodeSpec decodes an assigned spec, by hand (jsonstr.Reader), so a
// runner links no encoding/json: whatever encoding/json writes for a Spec
// decodes as encoding/json decodes it (TestDecodeSpecIsEncodingJSON);
// unknown keys are skipped, and a null leaves a field as it is.
func decodeSpec(b []byte) (*Spec, error) {
	s := new(Spec)
	r := jsonstr.NewReader(b)
	str := func(p *string) bool {
		if r.Null() {
			return true
		}
		v, ok := r.String()
		*p = v
		return ok
	}
	list := func(p *[]string) bool {
		v, ok := r.Strings()
		*p = v
		return ok
	}
	in := func(p *int) bool {
		if r.Null() {
			return true
		}
		n, ok := r.Int(strconv.IntSize)
		*p = int(n)
		return ok
	}
	ok := r.Object(func(key string) bool {
		switch key {
		case "id":
			return str(&s.ID)
		case "state_dir":
			return str(&s.StateDir)
		case "dir":
			return str(&s.Dir)
		case "mode":
			return str(&s.Mode)
		case "control_key":
			return str(&s.ControlKey)
		case "argv":
			return list(&s.Argv)
		case "env":
			return list(&s.Env)
		case "cwd":
			return str(&s.Cwd)
		case "home":
			return str(&s.Home)
		case "cols":
			return in(&s.Cols)
		case "rows":
			return in(&s.Rows)
		case "policy":
			if r.Null() {
				return true
			}
			p := &s.Policy
			return r.Object(func(key string) bool {
				switch key {
				case "enabled":
					if r.Null() {
						return true
					}
					v, ok := r.Bool()
					p.Enabled = v
					return ok
				case "rw":
					return list(&p.RW)
				case "ro":
					return list(&p.RO)
				case "rw_dev":
					return list(&p.RWDev)
				case "net_restrict":
					if r.Null() {
						return true
					}
					v, ok := r.Bool()
					p.NetRestrict = v
					return ok
				case "net_connect_tcp":
					if r.Null() {
						p.NetConnectTCP = nil
						return true
					}
					p.NetConnectTCP = []uint16{}
					return r.Array(func() bool {
						n, ok := r.Int(64)
						p.NetConnectTCP = append(p.NetConnectTCP, uint16(n))
						return ok && n >= 0 && n <= 65535
					})
				}
				return r.Skip()
			})
		case "force_isolation_fail":
			return str(&s.ForceIsolationFail)
		case "bench_no_screen":
			if r.Null() {
				return true
			}
			v, ok := r.Bool()
			s.BenchNoScreen = v
			return ok
		case "walls":
			if r.Null() {
				return true
			}
			w := &s.Walls
			boolean := func(p *bool) bool {
				if r.Null() {
					return true
				}
				v, ok := r.Bool()
				*p = v
				return ok
			}
			return r.Object(func(key string) bool {
				switch key {
				case "limit_caps":
					return boolean(&w.LimitCaps)
				case "new_ipc":
					return boolean(&w.NewIPC)
				case "keep_caps":
					if r.Null() {
						return true
					}
					n, ok := r.Int(64)
					w.KeepCaps = uint64(n)
					return ok && n >= 0
				case "seccomp":
					// []byte: base64, as encoding/json writes it.
					if r.Null() {
						w.Seccomp = nil
						return true
					}
					v, ok := r.String()
					if !ok {
						return false
					}
					b, err := base64.StdEncoding.DecodeString(v)
					w.Seccomp = b
					return err == nil
				}
				return r.Skip()
			})
		case "max_runtime_seconds":
			if r.Null() {
				return true
			}
			f, ok := r.Float()
			s.MaxRuntimeSeconds = f
			return ok
		case "stdin":
			return str(&s.Stdin)
		case "max_output_bytes":
			if r.Null() {
				return true
			}
			n, ok := r.Int(64)
			s.MaxOutputBytes = n
			return ok
		}
		return r.Skip()
	})
	if !ok || !r.End() {
		return nil, fmt.Errorf("the job's spec (%d bytes) is not a JSON object of a spec's fields: the server and this runner are from different builds?", len(b))
	}
	return s, nil
}
