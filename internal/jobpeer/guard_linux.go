package jobpeer

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/shellctl/shellctl/internal/proctree"
)

// Guard decides, once per connection, whether a job opened it.
type Guard struct {
	cfg     Config
	mixedID uint64 // CgroupDir's own id: server, runners and maybe others share it
	// ownID is the id of the cgroup the server's sockets are made in,
	// learnt from a socket of its own where CgroupDir is unknown (no
	// cgroup file system to be seen, as in a container with a cgroup
	// namespace and none mounted): the jobs, which then share the
	// server's group, make theirs there too.
	ownID uint64
	// soleUID is the user every job runs as when the server can give
	// them no other (it lacks CAP_SETUID: not root): a socket another
	// user made is no job's. -1 when jobs may be of any user.
	soleUID int64

	mu   sync.Mutex
	jobs map[uint64]string // ids of job groups ever seen → their path
	// outside are ids of live groups that were seen to hold a non-job
	// owner of a socket: a group never becomes a job's later (job groups
	// are made fresh, and ids are not reused within a boot).
	outside map[uint64]bool
}

// New makes a guard. With a CgroupDir it learns the job groups there now.
func New(cfg Config) *Guard {
	g := &Guard{cfg: cfg, jobs: map[uint64]string{}, outside: map[uint64]bool{}}
	if len(g.cfg.RunnerComm) > 15 {
		g.cfg.RunnerComm = g.cfg.RunnerComm[:15]
	}
	if cfg.CgroupDir != "" {
		var st unix.Stat_t
		if err := unix.Stat(cfg.CgroupDir, &st); err == nil {
			g.mixedID = st.Ino
		} else {
			g.cfg.CgroupDir, g.cfg.JobGroups = "", false
		}
	}
	if g.cfg.CgroupDir == "" {
		g.ownID = ownSocketCgroup()
	}
	g.soleUID = soleJobUID()
	if g.cfg.JobGroups {
		g.rescan()
	}
	return g
}

// soleJobUID is the only user a job of this process can be (-1: any). A
// process without CAP_SETUID in its permitted set cannot change its
// users, nor can its descendants under no_new_privs (every job's): their
// sockets carry its file-system uid. A job's user namespace changes
// nothing: the kernel's uid of what it makes stays the job's.
func soleJobUID() int64 {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return -1
	}
	if data[0].Permitted&(1<<unix.CAP_SETUID) != 0 {
		return -1
	}
	uid, euid := os.Getuid(), os.Geteuid()
	if uid != euid {
		return -1
	}
	return int64(euid)
}

// ownSocketCgroup is the id of the cgroup this process makes its sockets
// in (0 where the kernel does not tell): the id of a loopback connection
// to itself, asked of sock_diag as a client's is.
func ownSocketCgroup() uint64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0
	}
	defer c.Close()
	local, err1 := netip.ParseAddrPort(c.LocalAddr().String())
	remote, err2 := netip.ParseAddrPort(c.RemoteAddr().String())
	if err1 != nil || err2 != nil {
		return 0
	}
	p, err := lookupSocket(local, remote)
	if err != nil || !p.hasCgroup {
		return 0
	}
	return p.cgroup
}

// Check decides for the TCP connection whose server end is local and
// whose client end is remote.
func (g *Guard) Check(local, remote netip.AddrPort) Verdict {
	p, err := lookupSocket(remote, local)
	switch {
	case errors.Is(err, errNoSocket):
		if isLocal(remote.Addr()) {
			return Verdict{Job: true, Why: "the client's socket was gone before it could be checked (a client that writes a request and closes)"}
		}
		return Verdict{Why: "client not on this machine"}
	case err != nil:
		if isLocal(remote.Addr()) {
			return Verdict{Job: true, Why: "could not check the client: " + err.Error()}
		}
		return Verdict{Why: "client not on this machine"}
	}
	// A socket made outside the server's own group: its group may decide
	// at once (a job's group; one already seen to hold a stranger). Jobs
	// are never in another group than theirs or, with --no-cgroup, the
	// server's.
	other := p.hasCgroup && ((g.cfg.CgroupDir != "" && p.cgroup != g.mixedID) ||
		(g.cfg.CgroupDir == "" && g.ownID != 0 && p.cgroup != g.ownID))
	if other {
		if v, ok := g.byGroup(p.cgroup); ok {
			return v
		}
	}
	if g.soleUID >= 0 && int64(p.uid) != g.soleUID {
		return Verdict{Why: "the client's socket was made by uid " + strconv.FormatUint(uint64(p.uid), 10) +
			", and every job of this server (without CAP_SETUID) runs as uid " + strconv.FormatInt(g.soleUID, 10)}
	}
	if p.inode == 0 {
		return Verdict{Job: true, Why: "the client's socket has no process any more (closed before it was checked)"}
	}
	// Every job's process descends from the server: from its runner while
	// that lives (the runner is its subreaper), and from the server (a
	// child subreaper, PID 1 in a container) once it did not. Look among
	// the server's descendants first — a few processes, not the machine's.
	if owner := findAmongDescendants(p.inode); owner != 0 {
		v, _ := g.byProcess(owner)
		return v
	}
	// Not a descendant's now — but a job may have handed the socket on
	// meanwhile (forked and closed). Find who holds it, wherever it is.
	var first []int
	if !other && g.cfg.CgroupDir != "" {
		// Made in the server's group: its maker most likely still is
		// there (a client started beside the server), a short list.
		first = groupProcs(g.cfg.CgroupDir)
	}
	owner := findOwner(p.inode, p.uid, first)
	if owner == 0 {
		p2, err := lookupSocket(remote, local)
		if err != nil || p2.inode != p.inode {
			return Verdict{Job: true, Why: "the client's socket was closed before it was checked"}
		}
		if owner = findOwner(p2.inode, p2.uid, nil); owner == 0 {
			if other {
				// Made in a group of no job, and held by a process this
				// PID namespace does not show (a sidecar sharing the
				// network namespace): every job is our descendant, hence
				// visible.
				return Verdict{Why: "the client's process is outside this PID namespace"}
			}
			// Made where jobs are, and held by no process we can see: in
			// flight in a unix socket's queue (SCM_RIGHTS), or held by a job's
			// process that made itself non-dumpable (a non-root server
			// cannot read its descriptors).
			return Verdict{Job: true, Why: "the client's socket is held by no visible process (handed on)"}
		}
	}
	v, ownGroup := g.byProcess(owner)
	if !v.Job && other && ownGroup == p.cgroup {
		g.mu.Lock()
		g.outside[p.cgroup] = true
		g.mu.Unlock()
	}
	return v
}

// findAmongDescendants looks for the socket among the descriptors of the
// server's descendants. One whose descriptors cannot be read (runners and
// stages are not dumpable; a job may make itself so, under a server that is
// not root) is passed over: a socket made where jobs are that no visible
// process holds is refused in the end (Check).
func findAmongDescendants(inode uint32) int {
	want := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	todo := proctree.ChildrenOf(os.Getpid(), nil)
	for n := 0; len(todo) > 0 && n < maxDescendants; n++ {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		// Descriptors before children: a child forked after this read
		// is listed below, so a socket handed down by fork-and-close is
		// still met.
		if holds(pid, want) {
			return pid
		}
		todo = proctree.ChildrenOf(pid, todo)
	}
	return 0
}

// maxDescendants bounds the walk of the server's tree (jobs may fork a
// lot; the walk must not become a job's lever on the server).
const maxDescendants = 1 << 16

// byGroup decides from the group the socket was made in, when it can.
func (g *Guard) byGroup(id uint64) (Verdict, bool) {
	g.mu.Lock()
	path, job := g.jobs[id]
	out := g.outside[id]
	g.mu.Unlock()
	if !job && !out && g.cfg.JobGroups {
		g.rescan() // a group made since
		g.mu.Lock()
		path, job = g.jobs[id]
		g.mu.Unlock()
	}
	if job {
		return Verdict{Job: true, JobID: jobOfGroup(path), Why: "the client's socket was made in the job's cgroup " + path}, true
	}
	if out {
		return Verdict{Why: "the client's cgroup holds no job"}, true
	}
	return Verdict{}, false
}

// rescan learns the ids of the job groups under CgroupDir, sub-groups a
// job made included. A group removed before it was seen is not learnt:
// its sockets are decided by their owner (byProcess).
func (g *Guard) rescan() {
	ents, err := os.ReadDir(g.cfg.CgroupDir)
	if err != nil {
		return
	}
	found := map[uint64]string{}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), JobGroupPrefix) {
			walkGroups(filepath.Join(g.cfg.CgroupDir, e.Name()), maxGroupDepth, found)
		}
	}
	g.mu.Lock()
	for id, p := range found {
		g.jobs[id] = p
	}
	g.mu.Unlock()
}

// JobGroupPrefix starts the name of every job group (and of the group of
// ended jobs' leftovers) a runner makes.
const JobGroupPrefix = "shellctl-"

// maxGroupDepth bounds the walk into the sub-groups a job made (cgroup v2
// allows deep trees; the walk must not be a job's lever on the server).
const maxGroupDepth = 8

func walkGroups(dir string, depth int, found map[uint64]string) {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return
	}
	found[st.Ino] = dir
	if depth == 0 {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			walkGroups(filepath.Join(dir, e.Name()), depth-1, found)
		}
	}
}

// byProcess decides from the process that holds the socket: a job's when
// it is in a job group now (a leftover moved out of its ended job's group)
// or descends from a runner. It also returns the id of the process's
// group (0 if unknown).
func (g *Guard) byProcess(pid int) (Verdict, uint64) {
	var group uint64
	if g.cfg.CgroupDir != "" {
		if dir, ok := cgroupDirOf(pid, g.cfg.CgroupDir); ok {
			var st unix.Stat_t
			if unix.Stat(dir, &st) == nil {
				group = st.Ino
			}
			if rel, err := filepath.Rel(g.cfg.CgroupDir, dir); err == nil && strings.HasPrefix(rel, JobGroupPrefix) {
				top := filepath.Join(g.cfg.CgroupDir, strings.SplitN(rel, "/", 2)[0])
				return Verdict{Job: true, JobID: jobOfGroup(top), Why: "the client process " + strconv.Itoa(pid) + " is in the job group " + dir}, group
			}
		}
	}
	self := os.Getpid()
	for a, n := pid, 0; a > 0 && n < maxAncestors; n++ {
		if a == self {
			// The server's only children are its runners: a descendant
			// of the server is a job's process — one an ended job left,
			// re-parented to a server that is PID 1 or a subreaper.
			return Verdict{Job: true, Why: "the client process " + strconv.Itoa(pid) + " descends from the server (left by an ended job)"}, group
		}
		comm, ppid, ok := commAndParent(a)
		if !ok {
			break
		}
		if a != pid && comm == g.cfg.RunnerComm {
			return Verdict{Job: true, JobID: runnerJobID(a), Why: "the client process " + strconv.Itoa(pid) + " descends from the runner " + strconv.Itoa(a)}, group
		}
		a = ppid
	}
	return Verdict{Why: "the client process " + strconv.Itoa(pid) + " is no job's"}, group
}

// maxAncestors bounds the walk up the parents (a chain is a few deep).
const maxAncestors = 4096

// jobOfGroup names the job of a group shellctl-<server>-<runner pid>-<t>,
// by its runner's arguments (a runner shows its job's id there).
func jobOfGroup(path string) string {
	name := filepath.Base(path)
	f := strings.Split(strings.TrimPrefix(name, JobGroupPrefix), "-")
	if len(f) != 3 {
		return ""
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return ""
	}
	return runnerJobID(pid)
}

// runnerJobID reads --job-id from a runner's arguments.
func runnerJobID(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	args := bytes.Split(b, []byte{0})
	for i := 0; i+1 < len(args); i++ {
		if string(args[i]) == "--job-id" {
			id := string(args[i+1])
			if strings.Trim(id, "_") == "" {
				return "" // a warm runner not given its job yet
			}
			return id
		}
	}
	return ""
}

// commAndParent reads a process's command name and parent from
// /proc/<pid>/stat (the name is between the first '(' and the last ')').
func commAndParent(pid int) (string, int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return "", 0, false
	}
	f := strings.Fields(string(b[j+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return "", 0, false
	}
	return string(b[i+1 : j]), ppid, true
}

// cgroupDirOf is the directory of pid's cgroup v2 group, found beside
// base (the directory of a group whose path we know): its mount is base's.
func cgroupDirOf(pid int, base string) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", false
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	p, ok1 := v2Path(b)
	self, ok2 := v2Path(own)
	if !ok1 || !ok2 {
		return "", false
	}
	// base is the directory of our own group: the mount point is what is
	// left of it without our path.
	mount := strings.TrimSuffix(base, strings.TrimSuffix(self, "/"))
	if mount == base && self != "/" {
		return "", false
	}
	return filepath.Join(mount, p), true
}

func v2Path(b []byte) (string, bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, strings.HasPrefix(p, "/")
		}
	}
	return "", false
}

// groupProcs lists the processes of the cgroup at dir.
func groupProcs(dir string) []int {
	b, err := os.ReadFile(dir + "/cgroup.procs")
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// findOwner finds a process holding the socket with this inode, looking
// first among first, then the processes of the socket's user, then the
// rest. 0: none visible.
func findOwner(inode, uid uint32, first []int) int {
	want := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	self := os.Getpid()
	for _, pid := range first {
		if pid != self && holds(pid, want) {
			return pid
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var others []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name(), &st) != nil {
			continue
		}
		if st.Uid != uid {
			others = append(others, pid)
			continue
		}
		if holds(pid, want) {
			return pid
		}
	}
	for _, pid := range others {
		if holds(pid, want) {
			return pid
		}
	}
	return 0
}

// holds reports whether one of pid's descriptors is the socket named want.
func holds(pid int, want string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if l, err := os.Readlink(dir + "/" + n); err == nil && l == want {
				return true
			}
		}
		if err != nil {
			return false
		}
	}
}

// isLocal reports whether a is an address of this machine (in this
// network namespace).
func isLocal(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: treated as local, so refused
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}
