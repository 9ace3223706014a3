// Package synth builds synthetic sglang trees in the upstream shapes the
// built-in sm120-fusion patch meets, for tests and benchmarks. Each shape is
// one of our txtar fixtures (testdata/shapes, copied into shapes/ by go
// generate); with fullSize the target files are padded with generated Python
// at their "# smpatch-synth: filler" markers to about upstream's file sizes.
//
// It must not be imported by the smpatch binary, and it never holds
// upstream text: every shape is our own.
package synth
