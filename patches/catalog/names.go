package catalog

import "github.com/smpatch/smpatch/internal/lazyre"

var (
	patchNameRE  = lazyre.New(`^[a-z0-9][a-z0-9._-]*$`)
	moduleNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	commitRE     = lazyre.New(`^[0-9a-f]{7,64}$`)
	// distNameRE is a Python distribution name (PEP 508).
	distNameRE = lazyre.New(`^(?i:[a-z0-9]|[a-z0-9][a-z0-9._-]*[a-z0-9])$`)
)

// ValidName reports whether s is a patch name: a lower-case ASCII letter
// or digit, then lower-case letters, digits, '.', '_' and '-'.
func ValidName(s string) bool { return patchNameRE().MatchString(s) }

// validModuleName reports whether s is a Python module name in ASCII: a
// letter or '_', then letters, digits and '_'.
func validModuleName(s string) bool { return moduleNameRE().MatchString(s) }
