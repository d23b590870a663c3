//go:build !linux

package proctree

import "syscall"

// NewTracker is only implemented on Linux (cgroup v2, child subreaper, /proc).
func NewTracker(opts Options) (Tracker, Info, error) {
	return nil, Info{Why: ErrUnsupported.Error()}, ErrUnsupported
}

// OpenCgroupFD is only implemented on Linux.
func OpenCgroupFD(t Tracker) (int, error) { return -1, ErrNoCgroup }

// SignalGroup is only implemented on Linux.
func SignalGroup(t Tracker, pgrp int, sig syscall.Signal) (int, error) { return 0, ErrUnsupported }

// SharedPidsLimit is only implemented on Linux (cgroup v2).
func SharedPidsLimit() (int64, string, bool) { return 0, "", false }
