// Package lazyre compiles a regular expression the first time it is used,
// so that a package's patterns cost nothing at start-up and nothing at all
// to commands that never reach them.
//
// It must not know what the patterns are for.
package lazyre
