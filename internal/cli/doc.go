// Package cli is smpatch's command line: the plumbing every command shares
// (global flags, the config file, the one output convention and JSON
// writer, colour, one-line usage errors, signal handling, shell
// completion, the root builder) and the commands that patch and inspect a
// tree (list, show, apply, revert, status, probe, journal, version).
//
// Each command is one file named by its command path (apply.go,
// journal_trust.go): flags into an options struct, one call into the
// library, printing. It must not decide anything a library package can:
// whether patches apply is patches', what a host supports is probe's.
//
// It must not import the packages of the heavy commands (upstream,
// matrix, launch, image, source/gitrepo) nor anything that links go-git's
// transports, net/http, Kubernetes or a registry client: the program
// built from it alone (cmd/smpatch) starts in about the time of a bare
// Go program, and hands the commands it does not link (Delegated) to
// smpatch-full, built from package full, which adds them to the same root.
package cli
