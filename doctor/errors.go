package doctor

import (
	"fmt"
	"strings"
)

// NotSGLangError is a launch command line that does not start sglang's
// server.
type NotSGLangError struct {
	Argv []string
	Why  string
}

func (e *NotSGLangError) Error() string {
	cmd := strings.Join(e.Argv, " ")
	if len(cmd) > 120 {
		cmd = cmd[:117] + "..."
	}
	return fmt.Sprintf("the launch %q is not an sglang server: %s (want python -m sglang.launch_server ARGS or sglang serve ARGS)", cmd, e.Why)
}

// InputError is an input doctor cannot read as what it must be: a
// config.json, a model architecture the tree has no class for, a tree
// whose version cannot be read. Where names the file or input.
type InputError struct {
	Where string
	Why   string
}

func (e *InputError) Error() string { return e.Where + ": " + e.Why }
