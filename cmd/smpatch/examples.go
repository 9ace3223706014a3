package main

import (
	"github.com/spf13/cobra"
)

// The Examples section of every command's --help. Each line that starts
// with "smpatch " is a command line run from the root of a clone of
// smpatch: it reads the repository's examples/ and writes only into
// ~/src/sglang (a copy of the sample tree, see exampleSetup) and out/.
// A comment saying "exit N" gives its exit code; "after make demo-X" what
// must have run first; "needs ..." what a fresh clone does not have.
// TestExamplesRun runs every one that needs nothing, verbatim.

var examples = map[string]string{
	"doctor": `  smpatch doctor --repo ~/src/sglang --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.17.json -- python -m sglang.launch_server --model-path /models/m --tp-size 8   # exit 3: the host's ACS
  smpatch doctor --repo ~/src/sglang --probe-file examples/hosts/rtx-pro-6000x8-p2p-ready.json --format json -- python -m sglang.launch_server --model-path /models/m --tp 8
  smpatch doctor --image oci:out/demo-image/images:fusion --probe-file examples/hosts/rtx-pro-6000x8-p2p-ready.json -- python3 -m sglang.launch_server --model-path /models/m --tp 2   # after make demo-image
  smpatch doctor --list                    # the rules, with the sglang releases and main commits each applies to`,
	"list": `  smpatch list
  smpatch list --json`,
	"show": `  smpatch show sm120-fusion
  smpatch show sm120-fusion --repo ~/src/sglang   # the diff it would make there
  smpatch show sm120-fusion --json`,
	"apply": `  smpatch apply sm120-fusion --repo ~/src/sglang --dry-run
  smpatch apply sm120-fusion --repo ~/src/sglang --check-arch --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.16.json   # exit 3: refused, nothing written
  smpatch apply sm120-fusion --repo ~/src/sglang --check-arch --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.17.json`,
	"status": `  smpatch status --repo ~/src/sglang
  smpatch status --repo ~/src/sglang --json`,
	"journal": `  smpatch journal trust --repo ~/src/sglang
  smpatch journal forget sm120-fusion --repo vendor/sglang   # needs an entry that cannot be finished`,
	"journal trust": `  smpatch journal trust --repo ~/src/sglang     # a journal copied from elsewhere, after checking it
  smpatch journal trust --repo ~/src/sglang --json`,
	"revert": `  smpatch revert --repo ~/src/sglang --dry-run   # what it would restore
  smpatch revert sm120-fusion --repo ~/src/sglang --json
  smpatch revert --repo ~/src/sglang`,
	"journal forget": `  smpatch journal forget sm120-fusion --repo vendor/sglang   # needs an entry that cannot be finished`,
	"new": `  smpatch new my-fusion --repo ~/src/my-sglang --into ~/my-patches   # after go run ./examples/hand-edit ~/src/my-sglang: a checkout with a hand edit
  smpatch new my-fusion --repo ~/src/sglang-main --base v0.5.17 --into ~/my-patches   # needs a checkout of yours with an edit since v0.5.17
  smpatch new my-fusion --repo .venv/lib/python3.12/site-packages --wheel sglang-0.5.17-py3-none-any.whl --into ~/my-patches   # needs an installed sglang and its wheel`,
	"import": `  smpatch import fix-gate --git ~/src/sglang-clone --commit 1a2b3c4d5e6f --into ~/my-patches   # needs a clone of sglang holding that commit
  smpatch import fix-gate --file 0001-fix-gate.patch --into ~/my-patches   # needs a patch file (git format-patch, or a plain diff)
  smpatch import fix-gate --url https://github.com/sgl-project/sglang/pull/32330 --into ~/my-patches   # needs the network`,
	"refresh": `  smpatch refresh my-fusion --repo ~/src/sglang --catalog ~/my-patches   # another tree: where the shape differs, a new variant beside the old ones`,
	"probe": `  smpatch probe
  smpatch probe -o out/host.json           # the JSON report, for --probe-file on another machine
  smpatch probe --image oci:out/demo-image/images:fusion --json   # after make demo-image
  smpatch probe --scan .venv/lib/python3.12/site-packages/flashinfer/data/libflashinfer.so   # needs a flashinfer wheel: the SM targets a binary holds`,
	"checkout": `  smpatch checkout sglang@v0.5.9 --out ~/src/sglang-0.5.9   # needs the network
  smpatch checkout flashinfer@main --out ~/src/flashinfer --json   # needs the network`,
	"check": `  smpatch check --upstream sglang@main   # needs the network
  smpatch check --upstream sglang@main --format junit -o out/check.xml   # needs the network
  smpatch check --repo ~/src/sglang-git --range v0.5.6..v0.5.9   # needs a clone of sglang with its tags`,
	"matrix": `  smpatch matrix expand examples/story/matrix.toml --explain
  smpatch matrix render examples/story/matrix.toml --out out/launch`,
	"matrix expand": `  smpatch matrix expand examples/story/matrix.toml
  smpatch matrix expand examples/story/matrix.toml --explain --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.16.json
  smpatch matrix expand examples/story/matrix.toml --format github --shard 1/2`,
	"matrix build": `  smpatch matrix build examples/story/matrix.toml --out out/images --base oci:out/demo-image/base   # after make demo-image
  smpatch matrix build examples/story/matrix.toml --push registry.example.com/smpatch/story   # needs the network and a registry`,
	"matrix render": `  smpatch matrix render examples/story/matrix.toml --out out/launch
  smpatch matrix render examples/story/matrix.toml --out out/launch --refs out/images/refs.json   # after matrix build --out out/images`,
	"matrix run": `  smpatch matrix run examples/fake/matrix.toml --dry-run --repo ~/src/sglang
  smpatch matrix run examples/story/matrix.toml --repo ~/src/sglang --out out/results   # needs the GPU host
  smpatch matrix run examples/story/matrix.toml --runner docker --refs out/images/refs.json   # needs the GPU host and docker`,
	"matrix compare": `  smpatch matrix compare out/demo-matrix   # after make demo-matrix
  smpatch matrix compare out/demo-matrix --pair unpatched.fewchan.cgbs128:unpatched.default.cgbs128   # after make demo-matrix
  smpatch matrix compare out/demo-matrix --baseline unpatched.fewchan.cgbs128 --json   # after make demo-matrix`,
	"triage": `  smpatch triage out/demo-matrix/logs/*.log   # after make demo-matrix
  smpatch triage out/demo-matrix/logs/sm120-fusion.fewchan.cgbs128.log --json   # after make demo-matrix`,
	"image": `  smpatch image apply sm120-fusion --base oci:out/demo-image/base --out oci:out/demo-image/images:fusion   # after make demo-image
  smpatch image show oci:out/demo-image/images:fusion   # after make demo-image`,
	"image apply": `  smpatch image apply sm120-fusion --base oci:out/demo-image/base --out oci:out/demo-image/images:fusion   # after make demo-image
  smpatch image apply sm120-fusion --base lmsysorg/sglang:v0.5.9 --out registry.example.com/sglang:sm120   # needs the network and a registry`,
	"image show": `  smpatch image show oci:out/demo-image/images:fusion   # after make demo-image
  smpatch image show lmsysorg/sglang:v0.5.9 --json   # needs the network`,
	"version": `  smpatch version
  smpatch version --json`,
}

// exampleOrder is the order the examples are meant to be tried in (and
// TestExamplesRun runs them in): a command that reads what an earlier
// one wrote comes after it.
var exampleOrder = []string{"list", "show", "doctor", "probe", "apply", "status", "journal trust", "journal",
	"revert", "journal forget", "new", "refresh", "import", "checkout", "check", "matrix", "matrix expand", "matrix build", "matrix render",
	"matrix run", "matrix compare", "triage", "image", "image apply", "image show", "version"}

// exampleSetup makes the copy of the sample tree the examples patch,
// ~/src/sglang; "after make demo-image" and "after make demo-matrix" mean
// the demo wrote out/demo-image or out/demo-matrix first.
const exampleSetup = "mkdir -p ~/src && cp -R examples/sample/sglang ~/src/sglang"

// rootLong is the root command's help text: what smpatch is and where
// to read more.
const rootLong = `smpatch applies, checks and reverts source patches for sglang and flashinfer
on GPUs upstream does not fully support yet, and runs matrices of variants.

Docs: README.md (quick start, commands, exit codes) and docs/*.md in the
repository: docs/engine.md (apply, revert, status), docs/probe.md,
docs/upstream.md (check, checkout), docs/matrix.md, docs/image.md,
docs/launch.md (matrix run, triage). 'smpatch help COMMAND' shows a command's
flags and examples; they run from the root of a clone of smpatch, on a copy
of its sample sglang tree:

  ` + exampleSetup

// addExamples sets the Example of every command from the table above.
func addExamples(c *cobra.Command) {
	if ex, ok := examples[cmdName(c)]; ok && c.Example == "" {
		c.Example = ex
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
