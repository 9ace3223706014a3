// Command gen writes one of internal/synth's sglang trees to a directory,
// for benchmark scripts that need the files on disk:
//
//	go run ./internal/synth/gen -shape c4-s3 -full -o /tmp/tree
//
// With -list it prints the available shapes.
package main
