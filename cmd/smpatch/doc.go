// Command smpatch is the command line of smpatch: doctor and probe,
// named revertible patches for sglang and flashinfer (list, show, apply,
// revert, status, journal), their upstream history (check, checkout), and
// matrices of experiments (matrix, image, triage).
//
// It is the only main package. Each command is one file named by its
// command path (apply.go, matrix_run.go): an options struct holding the
// command's flags, its streams (IOStreams) and the functions it depends on,
// taken from the Factory, which builds expensive clients (the upstream
// cache with go-git's transports, the registry client, the Kubernetes
// client) only when a command asks for them; then one library call and
// printing. It decides nothing a library package can: whether patches
// apply is patches', what a host supports is probe's.
//
// Errors become exit codes in one place (errors.go); SIGINT and SIGTERM
// cancel the command's context from the process's first milliseconds
// (internal/interrupt), and a command they stop says in one line what it
// left and exits 130.
package main
