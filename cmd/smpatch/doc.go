// Command smpatch applies, reverts and checks named source patches for sglang
// and flashinfer, probes what the GPUs and installed libraries support, and
// turns a TOML matrix of environment variants into images, launch specs and runs.
//
// Each command is one file named by its command path (apply.go,
// matrix_run.go, image_show.go): flags into an options struct, one call
// into the library, printing. It must not decide anything a library
// package can: whether patches apply is patches', what a matrix expands
// to is matrix's, how a cell runs is launch's. root.go lists every
// command; output.go holds the one JSON writer.
package main
