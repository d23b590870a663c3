// Package isolation confines a job's process and builds its environment.
//
// The runner (shellctl-runner) stays unrestricted: it must write the job's
// log and the database. It starts the job's process through a child stage,
// its own binary re-executed with the hidden first argument [StageArg]. The
// stage ([StageMain]) reads a [StageConfig] from an inherited pipe, creates
// the job's HOME, confines itself with Landlock and execve's the script, so
// the confinement is in force before the first instruction of the job runs.
//
// The policy ([Policy]) is read from the server's environment once
// ([PolicyFromEnv]) and travels to the stage inside the job's spec. The
// stage never looks at its own environment, so nothing in a job's env can
// widen or disable its confinement.
//
// The Landlock calls are made with golang.org/x/sys/unix directly rather
// than through go-landlock: go-landlock's syscall package needs libcap's psx
// module, which this module does not require (see landlock_linux.go).
package isolation
