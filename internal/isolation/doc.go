// Package isolation confines a job's process and builds its environment.
//
// The runner (shellctl-runner) stays unrestricted: it must write the job's
// output. It starts the job with [Start], which confines one locked OS
// thread of the runner — the job's HOME made, its Landlock domain and
// no_new_privs set on that thread only — and forks the job from it, so the
// confinement is in force before the first instruction of the job runs
// while the runner's other threads stay free. The thread is never released.
//
// The policy ([Policy]) is read from the server's environment once
// ([PolicyFromEnv]) and travels to the runner inside the job's spec, as
// part of a [JobConfig]. Nothing in a job's env is ever read for it, so
// nothing there can widen or disable its confinement.
//
// The job's environment is built in one place ([BuildEnv]).
//
// The Landlock calls are made with golang.org/x/sys/unix directly rather
// than through go-landlock, which restricts whole processes through
// libcap's psx module (see landlock_linux.go).
package isolation
