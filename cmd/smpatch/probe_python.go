package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/smpatch/smpatch/probe"
)

// checkNamedPython refuses an interpreter named with --python (or
// $SMPATCH_PYTHON, or the config file) that does not exist: the probe
// would otherwise report an environment it never read. The default
// python3 missing is reported by the probe as unknown instead.
func checkNamedPython(o *probeOptions) error {
	if len(o.SitePackages) > 0 || !o.PythonNamed {
		return nil
	}
	py := o.Python
	var err error
	if strings.ContainsRune(py, os.PathSeparator) {
		var st os.FileInfo
		if st, err = os.Stat(py); err == nil && st.IsDir() {
			err = errors.New("is a directory")
		}
	} else {
		_, err = exec.LookPath(py)
	}
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = errors.New("not found on PATH")
	}
	return fmt.Errorf("probe: --python %s: %v", py, err)
}

func pySitePackages(p *probe.Python) []string {
	if p == nil {
		return nil
	}
	return p.SitePackages
}
