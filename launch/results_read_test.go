package launch

import (
	"strings"
	"testing"
)

// Results can come from elsewhere: a link to /dev/zero once made matrix
// compare grow until the machine ran out of memory.
func TestReadSummaryNotRegular(t *testing.T) {
	_, err := ReadSummary("/dev/zero")
	if err == nil || !strings.HasSuffix(err.Error(), "/dev/zero: not a regular file (a character device): not read") {
		t.Fatalf("got %v", err)
	}
}
