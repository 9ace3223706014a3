// Package runner is the one way smpatch runs a short external command
// (nvidia-smi, nvcc, a Python interpreter): under a timeout, in its own
// process group that is killed whole when the time is up (a wrapper script's
// children included), with its output bounded. It knows nothing of what the
// commands are; long-running servers are launch's, which owns their
// lifecycle.
package runner
