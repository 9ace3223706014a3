// Package testsvc gives tests the real services that scripts/services.sh
// starts (a container registry, a Docker daemon). A test asks for one by
// name; when its variable is not set the test is skipped with a loud
// message saying how to start it, or fails when $SMPATCH_REQUIRE_SERVICES
// is 1 (CI sets it, so a missing service is never silently skipped there).
//
// It must not be imported by the smpatch binary: it is for tests only.
package testsvc
