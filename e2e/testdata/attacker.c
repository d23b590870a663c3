/*
 * A hostile job's first instructions: for MS milliseconds (argv[1],
 * default 30) it tries everything a process may do to another in its own
 * Landlock domain — PTRACE_ATTACH, PTRACE_SEIZE, process_vm_readv and a
 * signal (tgkill/kill with signal 0, which checks the right and sends
 * nothing) — on every thread of its parent (the runner) and on every other
 * process it can see, and prints how many succeeded. Built static so it
 * runs its first attack within microseconds of execve.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long attach, seize, readmem, sigok, tries, others;
static long o_attach, o_readmem, o_sig;

static int try_attach(pid_t tid) {
	if (ptrace(PTRACE_ATTACH, tid, 0, 0) == 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return 1;
	}
	return 0;
}

static int try_readmem(pid_t pid) {
	char b[8];
	struct iovec l = {b, sizeof b}, r = {(void *)0x400000, sizeof b};
	/* EFAULT: allowed, the address just is not mapped. */
	return process_vm_readv(pid, &l, 1, &r, 1, 0) >= 0 || errno == EFAULT;
}

static double elapsed_ms(const struct timespec *t0) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1e3 + (t.tv_nsec - t0->tv_nsec) / 1e6;
}

int main(int argc, char **argv) {
	pid_t self = getpid(), ppid = getppid();
	double ms = argc > 1 ? atof(argv[1]) : 30;
	struct timespec t0;
	char path[64];
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		snprintf(path, sizeof path, "/proc/%d/task", (int)ppid);
		DIR *d = opendir(path);
		if (d) {
			struct dirent *e;
			while ((e = readdir(d))) {
				pid_t tid = atoi(e->d_name);
				if (tid <= 0)
					continue;
				tries++;
				attach += try_attach(tid);
				if (ptrace(PTRACE_SEIZE, tid, 0, 0) == 0) {
					seize++;
					ptrace(PTRACE_DETACH, tid, 0, 0);
				}
				readmem += try_readmem(tid);
				if (syscall(SYS_tgkill, ppid, tid, 0) == 0)
					sigok++;
			}
			closedir(d);
		}
		d = opendir("/proc");
		if (d) {
			struct dirent *e;
			while ((e = readdir(d))) {
				pid_t pid = atoi(e->d_name);
				if (pid <= 0 || pid == self || pid == ppid)
					continue;
				others++;
				o_attach += try_attach(pid);
				o_readmem += try_readmem(pid);
				if (kill(pid, 0) == 0)
					o_sig++;
			}
			closedir(d);
		}
	} while (elapsed_ms(&t0) < ms);
	printf("tries=%ld\nattach=%ld\nseize=%ld\nread_mem=%ld\nsignal=%ld\n", tries, attach, seize, readmem, sigok);
	printf("others=%ld\nother_attach=%ld\nother_read_mem=%ld\nother_signal=%ld\n", others, o_attach, o_readmem, o_sig);
	return 0;
}
