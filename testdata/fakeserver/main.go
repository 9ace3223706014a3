// Command fakeserver stands in for an sglang server in tests and demos: it
// prints log lines shaped like sglang's, serves /health once it is "loaded",
// and has a bench subcommand that prints a throughput line the way
// sglang.bench_one_batch_server does. Each failure the matrix runner must
// handle has a mode.
//
//	fakeserver [-mode M] [-host H] [-port N] [-delay D] [-tps X] [-noise F] [-pidfile F] [-child-pidfile F] [server flags...]
//	fakeserver bench -url http://127.0.0.1:N
//	docker run|exec|stop|rm ...   (installed under the name docker: see docker.go)
//
// Modes (flag -mode, else $FAKESERVER_MODE, else ok):
//
//	ok           healthy after -delay, serves until stopped
//	slow         healthy after 5×-delay
//	crash-arch   prints flashinfer's "No supported CUDA architectures" traceback, exits 1
//	oom          prints a CUDA out-of-memory line, then hangs (never healthy)
//	hang         never healthy, never exits
//	ignore-term  healthy, but ignores SIGTERM (only SIGKILL ends it)
//	exit0        exits 0 before it is healthy
//	story        decides from its flags, environment and -repo (default
//	             $SMPATCH_REPO, the tree smpatch patches: a checkout, or a
//	             site-packages holding an installed sglang, as in an image)
//	             like the story's server; it logs whether the SM120 fusion gate
//	             of the communicator.py it read is open. The sm120-fusion patch
//	             present in -repo crashes with the
//	             flashinfer arch line; the fewer-channels NCCL preset with
//	             --cuda-graph-max-bs above 256 fails KV pool init; otherwise
//	             throughput follows --cuda-graph-max-bs (512: 82, 128: 89.5)
//	             and the channel count.
//
// -noise F (or $FAKESERVER_NOISE) multiplies the throughput by 1 + F·z, z a
// standard normal drawn once per process from $FAKESERVER_SEED, the cell
// ($SMPATCH_CELL) and the repeat ($SMPATCH_REPEAT): run-to-run drift that
// repeats the same for the same seed.
//
// Unknown flags (sglang's own, like --tp 8) are accepted and ignored.
package main

import (
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if filepath.Base(os.Args[0]) == "docker" {
		os.Exit(fakeDocker(os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		os.Exit(bench(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "child" {
		child(os.Args[2:])
		return
	}
	os.Exit(serve(os.Args[1:]))
}

type config struct {
	mode         string
	port         int
	delay        time.Duration
	tps          float64
	pidfile      string
	childPidfile string
	repo         string
	host         string
	cgbs         int
	memFraction  float64
	noise        float64
}

// parse reads the flags it knows and skips the rest, so sglang's own
// command lines can be passed through unchanged.
func parse(args []string) (*config, error) {
	c := &config{mode: os.Getenv("FAKESERVER_MODE"), host: "127.0.0.1", port: 30000, delay: 100 * time.Millisecond, tps: 82, repo: os.Getenv("SMPATCH_REPO")}
	if c.mode == "" {
		c.mode = "ok"
	}
	if d := os.Getenv("FAKESERVER_DELAY"); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("FAKESERVER_DELAY: %w", err)
		}
		c.delay = v
	}
	if n := os.Getenv("FAKESERVER_NOISE"); n != "" {
		v, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return nil, fmt.Errorf("FAKESERVER_NOISE: %w", err)
		}
		c.noise = v
	}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		next := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag %s needs a value", args[i])
			}
			i++
			return args[i], nil
		}
		var err error
		var s string
		switch name {
		case "mode":
			c.mode, err = next()
		case "host":
			c.host, err = next()
		case "port":
			if s, err = next(); err == nil {
				c.port, err = strconv.Atoi(s)
			}
		case "delay":
			if s, err = next(); err == nil {
				c.delay, err = time.ParseDuration(s)
			}
		case "tps":
			if s, err = next(); err == nil {
				c.tps, err = strconv.ParseFloat(s, 64)
			}
		case "noise":
			if s, err = next(); err == nil {
				c.noise, err = strconv.ParseFloat(s, 64)
			}
		case "pidfile":
			c.pidfile, err = next()
		case "child-pidfile":
			c.childPidfile, err = next()
		case "repo":
			c.repo, err = next()
		case "cuda-graph-max-bs":
			if s, err = next(); err == nil {
				c.cgbs, err = strconv.Atoi(s)
			}
		case "mem-fraction-static":
			if s, err = next(); err == nil {
				c.memFraction, err = strconv.ParseFloat(s, 64)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

func logf(format string, args ...any) {
	fmt.Printf("[%s] %s\n", time.Now().UTC().Format("2006-01-02 15:04:05"), fmt.Sprintf(format, args...))
}

func serve(args []string) int {
	c, err := parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		return 2
	}
	if c.pidfile != "" {
		if err := os.WriteFile(c.pidfile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			return 1
		}
	}
	if c.mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	if c.childPidfile != "" {
		// A worker process in the server's process group, like sglang's
		// scheduler and detokenizer processes.
		self, _ := os.Executable()
		cmd := exec.Command(self, "child", c.childPidfile, c.mode)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			return 1
		}
	}
	logf("server_args=ServerArgs(mode=%q, port=%d, cuda_graph_max_bs=%d, mem_fraction_static=%g)", c.mode, c.port, c.cgbs, c.memFraction)
	logf("Init torch distributed begin.")

	mode := c.mode
	if mode == "story" {
		mode = c.story()
	}
	switch mode {
	case "crash-arch":
		time.Sleep(c.delay)
		logf("Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16")
		fmt.Println("Traceback (most recent call last):")
		fmt.Println(`  File "/sgl-workspace/sglang/python/sglang/srt/layers/communicator.py", line 88, in apply_flashinfer_allreduce_fusion`)
		fmt.Println(`  File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/comm.py", line 41, in gen_trtllm_comm_module`)
		fmt.Println("RuntimeError: No supported CUDA architectures found for major versions [9, 10].")
		return 1
	case "kv-pool":
		time.Sleep(c.delay)
		fmt.Println("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.55")
		return 1
	case "oom":
		time.Sleep(c.delay)
		fmt.Println("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 95.00 GiB")
		hang()
	case "hang":
		logf("Loading safetensors checkpoint shards:  40%% Completed | 26/64")
		hang()
	case "exit0":
		time.Sleep(c.delay)
		logf("nothing to serve; exiting")
		return 0
	case "ok", "slow", "ignore-term":
	default:
		fmt.Fprintf(os.Stderr, "fakeserver: unknown mode %q\n", c.mode)
		return 2
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
	if err != nil {
		fmt.Printf("OSError: [Errno 98] error while attempting to bind on address ('%s', %d): address already in use\n", c.host, c.port)
		return 1
	}
	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/bench", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "%g\n", c.tps)
	})
	go http.Serve(ln, mux)
	if c.noise != 0 {
		c.tps *= 1 + c.noise*drift()
	}

	delay := c.delay
	if mode == "slow" {
		delay *= 5
	}
	time.Sleep(delay)
	logf("Load weight end. avail mem=21.37 GB")
	logf("Capture cuda graph end. Time elapsed: 0.01 s")
	ready.Store(true)
	logf("The server is fired up and ready to roll!")

	sig := make(chan os.Signal, 1)
	if c.mode == "ignore-term" {
		// Notify on SIGTERM would undo signal.Ignore.
		signal.Notify(sig, syscall.SIGINT)
	} else {
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	}
	s := <-sig
	logf("Received %v; shutting down", s)
	return 0
}

// story picks the behaviour of the story's server from the command line,
// the environment and the sglang tree the server would import.
func (c *config) story() string {
	if c.repo != "" {
		file, open := sm120Gate(c.repo)
		switch {
		case file == "":
			logf("sm120 fusion gate: no communicator.py under %s", c.repo)
		case open:
			logf("sm120 fusion gate: open (%s calls _is_sm120_supported)", file)
			return "crash-arch"
		default:
			logf("sm120 fusion gate: closed (%s gates on SM90/SM100 only)", file)
		}
	}
	fewchan := false
	if n, err := strconv.Atoi(os.Getenv("NCCL_MAX_NCHANNELS")); err == nil && n <= 2 {
		fewchan = true
	}
	if fewchan && c.cgbs > 256 {
		return "kv-pool"
	}
	c.tps = 82
	if c.cgbs > 0 && c.cgbs <= 128 {
		c.tps = 89.5
	}
	if fewchan {
		c.tps += 4.1
	}
	return "ok"
}

// sm120Gate reads sglang's communicator.py under root, a source checkout
// (python/sglang/...) or an installed site-packages (sglang/...), and
// reports which file it read and whether its fusion gate admits SM120.
func sm120Gate(root string) (file string, open bool) {
	for _, rel := range []string{"python/sglang/srt/layers/communicator.py", "sglang/srt/layers/communicator.py"} {
		p := filepath.Join(root, rel)
		data, err := os.ReadFile(p)
		if err == nil {
			return p, strings.Contains(string(data), "_is_sm120_supported")
		}
	}
	return "", false
}

// drift is this process's standard normal draw, from $FAKESERVER_SEED,
// $SMPATCH_CELL and $SMPATCH_REPEAT.
func drift() float64 {
	h := fnv.New64a()
	for _, k := range []string{"FAKESERVER_SEED", "SMPATCH_CELL", "SMPATCH_REPEAT"} {
		h.Write([]byte(os.Getenv(k) + "\x00"))
	}
	return rand.New(rand.NewPCG(h.Sum64(), 1)).NormFloat64()
}

// child is a worker process: it records its pid and sleeps until killed.
func child(args []string) {
	if len(args) > 1 && args[1] == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	if len(args) > 0 {
		os.WriteFile(args[0], []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	hang()
}

// hang blocks until the process is killed.
func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

// bench asks a running server for its throughput and prints it like
// sglang.bench_one_batch_server.
func bench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:30000", "server base URL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(strings.TrimSuffix(*url, "/") + "/bench")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "bench: %s: %s", resp.Status, body)
		return 1
	}
	tps, err := strconv.ParseFloat(strings.TrimSpace(string(body)), 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Println("batch size: 1")
	fmt.Printf("latency: %.2f s\n", 256/tps)
	fmt.Printf("Output token throughput (tok/s): %.1f\n", tps)
	fmt.Printf("Input token throughput (tok/s): %.1f\n", tps*40)
	// The lines sglang.bench_one_batch_server prints (0.5.8 on).
	fmt.Printf("output throughput: %.2f tok/s\n", tps)
	fmt.Printf("last_ttft: %.2f s\n", 16/tps)
	return 0
}
