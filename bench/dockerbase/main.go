package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/smpatch/smpatch/internal/testkit/dockertest"
)

func main() {
	out := flag.String("out", "", "OCI layout directory to write")
	fs := flag.String("fakeserver", "", "the static fake server binary")
	bb := flag.String("busybox", dockertest.Busybox, "a static busybox binary")
	tarFile := flag.String("tar", "", "also write it as a docker-save tarball (docker load)")
	tag := flag.String("tag", "smpatch-test/base:latest", "the tarball's tag")
	flag.Parse()
	if *out == "" || *fs == "" {
		fmt.Fprintln(os.Stderr, "usage: dockerbase -fakeserver BIN -out DIR [-busybox PATH]")
		os.Exit(2)
	}
	d, err := dockertest.WriteLayout(*out, *bb, *fs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dockerbase:", err)
		os.Exit(1)
	}
	if *tarFile != "" {
		img, err := dockertest.Image(*bb, *fs)
		if err == nil {
			var t name.Tag
			if t, err = name.NewTag(*tag); err == nil {
				err = tarball.WriteToFile(*tarFile, t, img)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "dockerbase:", err)
			os.Exit(1)
		}
	}
	fmt.Println(d)
}
