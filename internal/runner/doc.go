// Package runner is the one way smpatch runs another program: a short
// command (nvidia-smi, nvcc, a Python interpreter, docker, sbatch) to its
// end under a timeout (Run), or a long-running one (a server, a benchmark)
// started and followed (Start). Each runs as the leader of a process group
// of its own, so that stopping it (SIGTERM, then SIGKILL after a grace)
// ends everything it started, a wrapper script's children included; and
// with an entry of its own in its environment (MarkPrefix + a token),
// which everything it starts inherits, so that stopping it also ends
// those of its descendants that left the group (setsid, a double fork: a
// daemonizing server), found by that entry in /proc/PID/environ. Its
// output goes through pipes of its own and is bounded.
//
// It knows nothing of what the commands are or why they run: the callers
// (probe, launch) decide what to start and what its output means.
package runner
