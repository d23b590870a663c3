/*
 * What a hostile root job tries against the machine once Landlock has
 * confined its files: each call below administers the kernel or leaves the
 * job's namespaces. It prints one "name=result" line per call, result
 * being 0 (it worked) or the errno's name. Nothing it does changes the
 * machine when it works: the host name is set to itself, the tmpfs
 * (argv[1]) unmounted at once, namespaces made in a child that exits,
 * settimeofday given nothing to set, reboot a wrong magic number.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static void show(const char *name, long r) {
	if (r < 0)
		printf("%s=%s\n", name, strerrorname_np(errno));
	else
		printf("%s=0\n", name);
	fflush(stdout);
}

/* in_child runs fn in a forked child and prints how the child ended: a
 * call that could move the caller into a new namespace does it there. */
static void in_child(const char *name, long (*fn)(void)) {
	pid_t p = fork();
	if (p == 0) {
		long r = fn();
		_exit(r < 0 ? errno : 0);
	}
	int st = 0;
	waitpid(p, &st, 0);
	if (WIFSIGNALED(st))
		printf("%s=signal%d\n", name, WTERMSIG(st));
	else if (WEXITSTATUS(st) == 0)
		printf("%s=0\n", name);
	else
		printf("%s=%s\n", name, strerrorname_np(WEXITSTATUS(st)));
	fflush(stdout);
}

static long do_unshare_user(void) { return unshare(CLONE_NEWUSER); }
static long do_unshare_net(void) { return unshare(CLONE_NEWNET); }
static long do_clone_user(void) {
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid(r, 0, 0);
	return r;
}
static long do_clone3(void) {
	uint64_t args[11] = {0};
	args[4] = SIGCHLD; /* exit_signal */
	long r = syscall(SYS_clone3, args, sizeof args);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid(r, 0, 0);
	return r;
}
extern char **environ;
static void *thread_main(void *a) { return a; }

#ifdef __x86_64__
static long do_x32(void) { return syscall(0x40000000 | SYS_getpid); }
#endif

int main(int argc, char **argv) {
	char host[256] = {0};
	gethostname(host, sizeof host - 1);
	show("sethostname", sethostname(host, strlen(host)));
	in_child("unshare_user", do_unshare_user);
	in_child("unshare_net", do_unshare_net);
	in_child("clone_user", do_clone_user);
	in_child("clone3", do_clone3);
	show("add_key", syscall(SYS_add_key, "user", "shellctl-powers", "x", 1, -2 /* KEY_SPEC_PROCESS_KEYRING */));
	show("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0));
	uint32_t mapattr[16] = {2 /* BPF_MAP_TYPE_ARRAY */, 4, 4, 1};
	show("bpf", syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, mapattr, sizeof mapattr));
	uint32_t pe[32] = {1 /* PERF_TYPE_SOFTWARE */, sizeof pe, 0 /* CPU_CLOCK */};
	show("perf_event_open", syscall(SYS_perf_event_open, pe, 0, -1, -1, 0));
	if (argc > 1) {
		long r = mount("none", argv[1], "tmpfs", 0, 0);
		int e = errno;
		if (r == 0)
			umount2(argv[1], MNT_DETACH);
		errno = e;
		show("mount", r);
	}
	show("settimeofday", syscall(SYS_settimeofday, 0, 0));
	show("userfaultfd", syscall(SYS_userfaultfd, 0));
	show("init_module", syscall(SYS_init_module, 0, 0, ""));
	show("reboot", syscall(SYS_reboot, 0, 0, 0, 0));
	show("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, 0, 0));
	show("getpid", getpid());
	/* The C library's clone3 gets ENOSYS and falls back to clone: a new
	 * process and a thread still start. */
	pid_t pid;
	char *targv[] = {"true", 0};
	int r = posix_spawn(&pid, "/bin/true", 0, 0, targv, environ);
	int st = -1;
	if (r == 0)
		waitpid(pid, &st, 0);
	printf("posix_spawn=%d\n", r == 0 && st == 0 ? 0 : r ? r : st);
	pthread_t t;
	r = pthread_create(&t, 0, thread_main, 0);
	if (r == 0)
		pthread_join(t, 0);
	printf("pthread_create=%d\n", r);
	fflush(stdout);
#ifdef __x86_64__
	in_child("x32", do_x32);
#endif
	return 0;
}
