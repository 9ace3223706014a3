package lazyre

import (
	"fmt"
	"regexp"
	"sync"
)

// New returns a function that compiles expr on its first call (panicking,
// as regexp.MustCompile does, if expr is malformed) and returns the same
// *regexp.Regexp on every call. It is safe for concurrent use.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// MaxSource is the longest regular expression Compile accepts, in bytes:
// RE2 matches in linear time, but compiling grows with the source (a
// 3 MiB expression took a second and hundreds of megabytes).
const MaxSource = 4096

// Compile compiles a regular expression read from outside input, refusing
// one longer than MaxSource.
func Compile(src string) (*regexp.Regexp, error) {
	if len(src) > MaxSource {
		return nil, fmt.Errorf("a regular expression of %d bytes, more than %d", len(src), MaxSource)
	}
	return regexp.Compile(src)
}
