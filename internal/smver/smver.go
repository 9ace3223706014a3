package smver

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a compute capability into its major and minor numbers. A
// trailing "a" or "f" (arch-specific or family targets) is accepted and
// dropped.
func Parse(s string) (major, minor int, err error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimPrefix(strings.TrimPrefix(t, "sm_"), "sm")
	t = strings.TrimRight(t, "af")
	if a, b, ok := strings.Cut(t, "."); ok {
		major, err1 := strconv.Atoi(a)
		minor, err2 := strconv.Atoi(b)
		if err1 == nil && err2 == nil && major > 0 && major < 100 && minor >= 0 && minor < 10 {
			return major, minor, nil
		}
	} else if n, err1 := strconv.Atoi(t); err1 == nil && n > 0 {
		if n < 20 {
			return n, 0, nil
		}
		if n < 1000 {
			return n / 10, n % 10, nil
		}
	}
	return 0, 0, fmt.Errorf("%q is not a GPU compute capability (like 12.0 or sm_120)", s)
}
