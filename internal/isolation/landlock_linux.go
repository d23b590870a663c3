package isolation

// Landlock through golang.org/x/sys/unix.
//
// Why not go-landlock: its syscall package imports libcap's psx module to run
// a syscall on every thread, which shellctl does not want: a job is confined
// on one thread only. The few calls needed (create a ruleset, add path
// rules, restrict self) are written out below with the same per-ABI tables
// and the same erratum rule.
//
// Threads: Landlock and no_new_privs are per-thread. The stage restricts
// the thread that then execs the job (execve ends its other threads), so
// the job's domain never holds any other process's thread.

import (
	"errors"
	"fmt"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock filesystem rights, in the kernel's bit order.
const (
	fsExecute     = unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsWriteFile   = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	fsReadFile    = unix.LANDLOCK_ACCESS_FS_READ_FILE
	fsReadDir     = unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsRemoveDir   = unix.LANDLOCK_ACCESS_FS_REMOVE_DIR
	fsRemoveFile  = unix.LANDLOCK_ACCESS_FS_REMOVE_FILE
	fsMakeChar    = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR
	fsMakeDir     = unix.LANDLOCK_ACCESS_FS_MAKE_DIR
	fsMakeReg     = unix.LANDLOCK_ACCESS_FS_MAKE_REG
	fsMakeSock    = unix.LANDLOCK_ACCESS_FS_MAKE_SOCK
	fsMakeFifo    = unix.LANDLOCK_ACCESS_FS_MAKE_FIFO
	fsMakeBlock   = unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
	fsMakeSym     = unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsRefer       = unix.LANDLOCK_ACCESS_FS_REFER
	fsTruncate    = unix.LANDLOCK_ACCESS_FS_TRUNCATE
	fsIoctlDev    = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	fsResolveUnix = unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
)

var fsRightNames = []struct {
	bit  uint64
	name string
}{
	{fsExecute, "execute"}, {fsWriteFile, "write_file"}, {fsReadFile, "read_file"},
	{fsReadDir, "read_dir"}, {fsRemoveDir, "remove_dir"}, {fsRemoveFile, "remove_file"},
	{fsMakeChar, "make_char"}, {fsMakeDir, "make_dir"}, {fsMakeReg, "make_reg"},
	{fsMakeSock, "make_sock"}, {fsMakeFifo, "make_fifo"}, {fsMakeBlock, "make_block"},
	{fsMakeSym, "make_sym"}, {fsRefer, "refer"}, {fsTruncate, "truncate"},
	{fsIoctlDev, "ioctl_dev"}, {fsResolveUnix, "resolve_unix"},
}

func accessNames(a uint64) []string {
	var out []string
	for _, r := range fsRightNames {
		if a&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	return out
}

// Rights granted per kind of path; intersected with what the ABI handles.
const (
	// Files (script, devices, file entries of the lists) may only carry
	// file rights, or landlock_add_rule fails with EINVAL.
	accessROFile  = fsExecute | fsReadFile
	accessRWFile  = fsExecute | fsReadFile | fsWriteFile | fsTruncate
	accessDevFile = fsReadFile | fsWriteFile | fsTruncate | fsIoctlDev
	accessRODir   = accessROFile | fsReadDir
	// accessRWDir is full access except device nodes and device ioctl:
	// a job (possibly root) that could mknod a block device in its HOME
	// would read the raw disk past every rule. Refer lets files move
	// between the job's directories (EXDEV otherwise); ResolveUnix lets
	// jobs reach sockets that other jobs created in these directories.
	accessRWDir = accessRODir | fsWriteFile | fsTruncate | fsRemoveDir | fsRemoveFile |
		fsMakeDir | fsMakeReg | fsMakeSock | fsMakeFifo | fsMakeSym | fsRefer | fsResolveUnix
	// accessDevDir is for a directory in the device list (e.g. /dev/pts).
	accessDevDir = fsReadDir | accessDevFile
)

// handledFSForABI is the set of filesystem rights each ABI can restrict
// (the same table as go-landlock's).
func handledFSForABI(abi int) uint64 {
	var h uint64
	if abi >= 1 {
		h = (1 << 13) - 1 // execute … make_sym
	}
	if abi >= 2 {
		h |= fsRefer
	}
	if abi >= 3 {
		h |= fsTruncate
	}
	if abi >= 5 {
		h |= fsIoctlDev
	}
	if abi >= 9 {
		h |= fsResolveUnix
	}
	return h
}

// erratumSignalScope is the Landlock erratum bit for signal scoping between
// threads of one process. Without its fix, a thread confined with signal
// scoping could be kept from the Go runtime's own signals between threads;
// go-landlock then falls back to ABI 5, we only leave signal scoping out.
const erratumSignalScope = 1 << 1

// scopedForABI is the set of IPC scopes to restrict.
func scopedForABI(abi, errata int) (scoped uint64, note string) {
	if abi < 6 {
		return 0, ""
	}
	scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	if errata&erratumSignalScope != 0 {
		scoped |= unix.LANDLOCK_SCOPE_SIGNAL
	} else {
		note = "signal scoping left out: kernel lacks the fix for Landlock erratum 2"
	}
	return scoped, note
}

// detectABI asks the kernel for its Landlock ABI version and errata.
func detectABI() (abi, errata int, err error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		switch e {
		case unix.ENOSYS:
			return 0, 0, errors.New("kernel built without Landlock (needs Linux 5.13 or later)")
		case unix.EOPNOTSUPP:
			return 0, 0, errors.New("Landlock is disabled at boot (add landlock to the lsm= kernel parameter)")
		}
		return 0, 0, fmt.Errorf("landlock_create_ruleset(version): %w", e)
	}
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_ERRATA)
	if e == 0 {
		errata = int(r) // older kernels answer EINVAL: no errata known fixed
	}
	return int(v), errata, nil
}

// rule is one path rule to add, with its path already opened (O_PATH) so
// the kind checked is the object the rule is put on.
type rule struct {
	path   string
	fd     int
	access uint64
}

// planner collects rules for one domain.
type planner struct {
	handled uint64
	rules   []rule
	index   map[string]int
	skipped []SkippedPath
}

func (p *planner) skip(path, reason string) {
	p.skipped = append(p.skipped, SkippedPath{Path: path, Reason: reason})
}

// add opens path and plans a rule with dirAccess or fileAccess by what it
// is. A path that cannot be used is skipped and recorded: leaving a rule
// out only ever takes access away.
func (p *planner) add(path string, dirAccess, fileAccess uint64) {
	if path == "" {
		return
	}
	if !filepath.IsAbs(path) {
		p.skip(path, "not an absolute path")
		return
	}
	path = filepath.Clean(path)
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			p.skip(path, "missing")
		} else {
			p.skip(path, "open: "+err.Error())
		}
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		p.skip(path, "stat: "+err.Error())
		return
	}
	access := fileAccess
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		access = dirAccess
	}
	access &= p.handled
	if i, ok := p.index[path]; ok {
		unix.Close(fd)
		p.rules[i].access |= access
		return
	}
	if access == 0 {
		unix.Close(fd)
		p.skip(path, "no right applies at this ABI")
		return
	}
	p.index[path] = len(p.rules)
	p.rules = append(p.rules, rule{path: path, fd: fd, access: access})
}

// addHandle plans a rule on an open directory handle (the job's HOME or
// cwd, checked by the server through the same handle): the rule is bound to
// that directory whatever its name leads to now. fd < 0 adds nothing.
func (p *planner) addHandle(path string, fd int, access uint64) {
	if fd < 0 {
		return
	}
	access &= p.handled
	if i, ok := p.index[path]; ok {
		p.rules[i].access |= access
		return
	}
	own, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		p.skip(path, "dup handle: "+err.Error())
		return
	}
	p.index[path] = len(p.rules)
	p.rules = append(p.rules, rule{path: path, fd: own, access: access})
}

func (p *planner) close() {
	for _, r := range p.rules {
		unix.Close(r.fd)
	}
}

// planRules turns a job config into rules: read-only + execute (the RO
// list, default or replaced, and the script), devices (the RW device list
// and the job's terminal), read-write (the extra RW list, HOME and cwd).
func planRules(cfg *JobConfig, handled uint64, cwdFD, homeFD int) *planner {
	p := &planner{handled: handled, index: map[string]int{}}
	ro := cfg.Policy.RO
	if len(ro) == 0 {
		ro = DefaultRO
	}
	for _, path := range ro {
		p.add(path, accessRODir, accessROFile)
	}
	p.add(cfg.Script, accessROFile, accessROFile)
	dev := cfg.Policy.RWDev
	if len(dev) == 0 {
		dev = DefaultRWDev
	}
	for _, path := range dev {
		p.add(path, accessDevDir, accessDevFile)
	}
	p.add(cfg.TTY, accessDevDir, accessDevFile)
	for _, path := range cfg.Policy.RW {
		p.add(path, accessRWDir, accessRWFile)
	}
	p.addHandle(cfg.Home, homeFD, accessRWDir)
	p.addHandle(cfg.Cwd, cwdFD, accessRWDir)
	return p
}

// rulesetAttr is struct landlock_ruleset_attr up to the "scoped" field
// (ABI 6). Only as many bytes as needed are passed, so older kernels accept it.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// buildDomain makes cfg's ruleset — the RO and device lists by name, HOME
// and cwd from their handles — with the strongest ABI the kernel offers,
// and hands it to enforce: restrictThread for a stage's job (the thread
// that then execs it), a keeper for the direct start's child
// (directDomain), a no-op for the stage's rehearsal (rehearse), which so
// runs every step of a job's domain but the last. Network access is
// handled only under the egress proxy's proxy-only policy
// (landlock_net_linux.go).
func buildDomain(cfg *JobConfig, cwdFD, homeFD int, enforce func(rulesetFD int) error) (Applied, error) {
	var a Applied
	abi, errata, err := detectABI()
	if err != nil {
		return a, err
	}
	a.ABI, a.Errata = abi, errata
	if abi < 1 {
		return a, fmt.Errorf("kernel reports Landlock ABI %d", abi)
	}
	handled := handledFSForABI(abi)
	net, err := handledNet(cfg, abi)
	if err != nil {
		return a, err
	}
	scoped, note := scopedForABI(abi, errata)
	if note != "" {
		a.Notes = append(a.Notes, note)
	}

	p := planRules(cfg, handled, cwdFD, homeFD)
	defer p.close()

	attr := rulesetAttr{handledAccessFS: handled, handledAccessNet: net, scoped: scoped}
	size := unsafe.Sizeof(attr.handledAccessFS) // ABI 1-3 layout
	if net != 0 {
		size = unsafe.Offsetof(attr.scoped) // ABI 4-5 layout
	}
	if scoped != 0 {
		size = unsafe.Sizeof(attr)
	}
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return a, fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	rulesetFD := int(r)
	defer unix.Close(rulesetFD)

	for _, rl := range p.rules {
		pb := unix.LandlockPathBeneathAttr{Allowed_access: rl.access, Parent_fd: int32(rl.fd)}
		_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
			unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
		if e != 0 {
			return a, fmt.Errorf("landlock_add_rule %s (%v): %w", rl.path, accessNames(rl.access), e)
		}
	}

	if net != 0 {
		if err := addNetRules(rulesetFD, cfg.Policy.NetConnectTCP); err != nil {
			return a, err
		}
		a.Notes = append(a.Notes, netNote(cfg.Policy.NetConnectTCP))
	}

	if err := enforce(rulesetFD); err != nil {
		return a, err
	}

	a.Enabled = true
	a.HandledFS = accessNames(handled)
	a.ScopeSignal = scoped&unix.LANDLOCK_SCOPE_SIGNAL != 0
	a.ScopeAbstractUnix = scoped&unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET != 0
	a.IoctlDev = handled&fsIoctlDev != 0
	for _, rl := range p.rules {
		a.Rules = append(a.Rules, AppliedRule{Path: rl.path, Access: accessNames(rl.access)})
	}
	a.Skipped = append(a.Skipped, p.skipped...)
	return a, nil
}

// restrictThread sets no_new_privs (required by landlock_restrict_self
// without CAP_SYS_ADMIN, and it stops setuid programs from gaining
// privileges inside the job) and enforces the ruleset, on the calling
// thread only: both are per-thread, and a process forked from the thread
// inherits them.
func restrictThread(rulesetFD int) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFD), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}
