package patches

// validPatchName reports whether s is a patch name: a lower-case ASCII
// letter or digit, then lower-case letters, digits, '.', '_' and '-'
// (the expression ^[a-z0-9][a-z0-9._-]*$).
func validPatchName(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// validModuleName reports whether s is a Python module name in ASCII: a
// letter or '_', then letters, digits and '_' (the expression
// ^[A-Za-z_][A-Za-z0-9_]*$).
func validModuleName(s string) bool {
	if s == "" || !isLetter(s[0]) && s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || isDigit(c) }
func isLetter(c byte) bool     { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
