package main

import (
	"archive/tar"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "gen":
		gen(os.Args[2:])
	case "measure":
		measure(os.Args[2:])
	case "save", "dockerfiles", "same", "extract":
		run := map[string]func([]string) error{"save": save, "dockerfiles": dockerfiles, "same": same, "extract": extract}[os.Args[1]]
		if err := run(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "imagebench:", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: imagebench gen -dir DIR -bytes N [-layers K] [-shape NAME]
       imagebench measure CMD [ARGS...]
       imagebench save -layout DIR -tag REPO:TAG -out FILE
       imagebench dockerfiles -refs REFS -base DIR -from REPO:TAG -ctx DIR
       docker inspect IMAGE | imagebench same REFS CELL
       imagebench extract -layout DIR`)
	os.Exit(2)
}

func gen(args []string) {
	fl := flag.NewFlagSet("gen", flag.ExitOnError)
	dir := fl.String("dir", "", "OCI layout directory to create")
	total := fl.Int64("bytes", 40<<20, "total bytes of the random layers")
	layers := fl.Int("layers", 4, "number of random layers")
	shape := fl.String("shape", "c5-s5", "sglang shape (internal/synth)")
	seed := fl.Uint64("seed", 1, "random seed")
	shell := fl.String("shell", "", "a static busybox to install as /bin/sh in a top layer")
	_ = fl.Parse(args)
	if *dir == "" || *layers < 1 {
		usage()
	}
	d, err := imagetest.Write(*dir, imagetest.Options{
		RandomLayers: *layers,
		RandomBytes:  *total / int64(*layers),
		Seed:         *seed,
		Shape:        *shape,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebench:", err)
		os.Exit(1)
	}
	if *shell != "" {
		if d, err = addShell(*dir, *shell); err != nil {
			fmt.Fprintln(os.Stderr, "imagebench:", err)
			os.Exit(1)
		}
	}
	fmt.Println(d)
}

// extract flattens a layout's one image with go-containerregistry's
// mutate.Extract, reading every entry, and prints the entries and bytes.
func extract(args []string) error {
	fl := flag.NewFlagSet("extract", flag.ExitOnError)
	dir := fl.String("layout", "", "OCI layout holding one image")
	_ = fl.Parse(args)
	img, err := onlyImage(*dir)
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var entries, bytes int64
	for {
		_, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, tr)
		if err != nil {
			return err
		}
		entries, bytes = entries+1, bytes+n
	}
	fmt.Println(entries, bytes)
	return nil
}

func measure(args []string) {
	if len(args) == 0 {
		usage()
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebench:", err)
		os.Exit(1)
	}
	var rss float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	fmt.Printf("%.3f %.1f\n", wall.Seconds(), rss)
}
