// Package isolation confines a job's process and builds its environment.
//
// The runner (shellctl-runner) stays unrestricted: it must write the job's
// output. Nothing but the job is ever inside the job's Landlock domain: the
// runner starts a stage ahead of need ([StartStage]: shellctl-stage, or its
// own binary again, with [StageArg]) and hands it the job ([Stage.Assign]); the stage
// ([StageMain]) sets up the job's terminal or pipes and working directory,
// makes the domain and no_new_privs on the thread that then calls execve,
// and becomes the job (stage_linux.go says why it must be so).
//
// The policy ([Policy]) is read from the server's environment once
// ([PolicyFromEnv]) and travels to the runner inside the job's spec, as
// part of a [JobConfig]. Nothing in a job's env is ever read for it, so
// nothing there can widen or disable its confinement.
//
// Beside the domain, the same thread cuts the job's capabilities and
// installs its seccomp filter last before execve ([Walls],
// walls_linux.go); the filter arrives built (internal/seccomp, in the
// server), so neither the runner nor the stage links its builder.
//
// The job's environment is built in one place ([BuildEnv]).
//
// The Landlock calls are made with golang.org/x/sys/unix directly rather
// than through go-landlock, which restricts whole processes through
// libcap's psx module (see landlock_linux.go).
package isolation
