package testsvc

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A required service that is missing fails the test; checked in a child
// process, since a failing test cannot be observed from inside itself.
func TestMissingRequiredFails(t *testing.T) {
	if os.Getenv("TESTSVC_CHILD") == "1" {
		Registry(t)
		return
	}
	for _, tc := range []struct {
		require, want string
		fail          bool
	}{
		{"1", "SMPATCH_REQUIRE_SERVICES=1 but SKIP (no registry)", true},
		{"", "SKIP (no registry): run scripts/services.sh up registry, then eval \"$(scripts/services.sh env)\" ($SMPATCH_TEST_REGISTRY is not set)", false},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingRequiredFails$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTSVC_CHILD=1", "SMPATCH_TEST_REGISTRY=", "SMPATCH_REQUIRE_SERVICES="+tc.require)
		out, err := cmd.CombinedOutput()
		if tc.fail != (err != nil) {
			t.Errorf("require=%q: err %v, want failure %v\n%s", tc.require, err, tc.fail, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("require=%q: output lacks %q:\n%s", tc.require, tc.want, out)
		}
	}
}

func TestPresent(t *testing.T) {
	t.Setenv("SMPATCH_TEST_REGISTRY", "127.0.0.1:5999")
	if got := Registry(t); got != "127.0.0.1:5999" {
		t.Fatalf("Registry = %q", got)
	}
}
