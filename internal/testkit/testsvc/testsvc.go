package testsvc

import (
	"os"
	"testing"
)

// Required reports whether missing services fail tests instead of skipping
// them ($SMPATCH_REQUIRE_SERVICES=1).
func Required() bool { return os.Getenv("SMPATCH_REQUIRE_SERVICES") == "1" }

// modules are the scripts/services.sh modules of the services tests name.
var modules = map[string]string{"kubernetes": "kube"}

func need(t testing.TB, what, variable string) string {
	t.Helper()
	v := os.Getenv(variable)
	if v != "" {
		return v
	}
	module := what
	if m, ok := modules[what]; ok {
		module = m
	}
	msg := "SKIP (no " + what + "): run scripts/services.sh up " + module + ", then eval \"$(scripts/services.sh env)\" ($" + variable + " is not set)"
	if Required() {
		t.Fatal("SMPATCH_REQUIRE_SERVICES=1 but " + msg)
	}
	t.Skip(msg)
	return ""
}

// Registry is the test registry's host:port ($SMPATCH_TEST_REGISTRY), a
// plain-HTTP registry on loopback.
func Registry(t testing.TB) string { return need(t, "registry", "SMPATCH_TEST_REGISTRY") }

// Need is the value of $variable, naming the service what, for services
// other modules of scripts/services.sh add.
func Need(t testing.TB, what, variable string) string {
	t.Helper()
	return need(t, what, variable)
}

// DockerHost is the test Docker daemon's address ($SMPATCH_TEST_DOCKER_HOST,
// unix:///.../docker.sock), to be passed to the docker CLI as DOCKER_HOST.
func DockerHost(t testing.TB) string { return need(t, "docker", "SMPATCH_TEST_DOCKER_HOST") }
