// Package dockertest builds, for tests, benchmarks and demos, a small base
// image that really runs under a container engine: busybox-static's rootfs
// (Debian's busybox-static package), the static fake sglang server
// (testdata/fakeserver) as /usr/local/bin/fakeserver, and a synthetic sglang
// installed in site-packages for smpatch to patch. The fake server's story
// mode reads that installed sglang ($SMPATCH_REPO in the image's config), so
// a patched image's container reports the patch from inside.
//
// It must not be imported by the smpatch binary.
package dockertest
