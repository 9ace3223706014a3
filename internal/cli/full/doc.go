// Package full adds the commands that need the heavy libraries to the
// command line of package cli: check and checkout (upstream history
// through go-git and its transports), matrix (expand, render, build, run,
// compare: the matrix, launch and image packages, with Kubernetes and
// registry clients), image (go-containerregistry) and triage. The
// smpatch-full program is cli's root with these commands; smpatch runs it
// for them.
//
// Each command is one file named by its command path (matrix_run.go,
// image_apply.go). It must not decide anything a library package can, and
// it adds nothing to the shared plumbing: that is package cli's.
package full
