// Command imagebench is the helper behind bench/image.bench.sh.
//
//	imagebench gen -dir DIR -bytes N [-layers K] [-shape c5-s5]
//	imagebench measure CMD [ARGS...]
//
// gen writes a synthetic base image: an OCI layout with random,
// incompressible layers (streamed to disk, never held in memory) under an
// installed sglang in one of the upstream shapes the built-in sm120-fusion
// patch meets. measure runs a command and prints its wall time in seconds
// and its peak resident set size in MiB ("1.234 56.7"), with the command's
// own output sent to stderr.
package main
