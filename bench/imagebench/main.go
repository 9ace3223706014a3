package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/smpatch/smpatch/image/imagetest"
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
	case "save", "dockerfiles", "same":
		run := map[string]func([]string) error{"save": save, "dockerfiles": dockerfiles, "same": same}[os.Args[1]]
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
       docker inspect IMAGE | imagebench same REFS CELL`)
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
