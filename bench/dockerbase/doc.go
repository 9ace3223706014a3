// Command dockerbase writes the runnable test base image (busybox-static,
// the fake sglang server, a synthetic installed sglang; see
// launch/dockertest) as an OCI layout, for bench/docker.bench.sh and
// examples/demo-docker.sh.
//
//	dockerbase -fakeserver BIN -out DIR [-busybox /bin/busybox] [-tar FILE -tag REPO:TAG]
package main
