package upstream

import "github.com/smpatch/smpatch/upstream/compat"

// CompatMarkdown is docs/compatibility.md for table t.
func CompatMarkdown(t *compat.Table, unreachable string) []byte { return nil }
