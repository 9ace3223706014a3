package main

import (
	"github.com/spf13/cobra"
)

// The Examples section of every command's --help. Each line that starts
// with "smpatch " is a command line that parses (TestExamples runs it
// through the command tree), with paths of the repository's examples/.

var examples = map[string]string{
	"doctor": `  smpatch doctor --repo examples/sample/sglang --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.17.json -- python -m sglang.launch_server --model-path /models/m --tp-size 8
  smpatch doctor --site-packages .venv/lib/python3.12/site-packages --model /models/m --format json
  smpatch doctor --list                    # the rules, with the sglang releases and main commits each applies to`,
	"list": `  smpatch list
  smpatch list --json
  smpatch list --catalog ./my-patches      # with your own patches`,
	"show": `  smpatch show sm120-fusion
  smpatch show sm120-fusion --repo examples/sample/sglang   # the diff it would make there
  smpatch show sm120-fusion --json`,
	"apply": `  smpatch apply sm120-fusion --repo examples/sample/sglang --dry-run
  smpatch apply sm120-fusion --repo examples/sample/sglang --check-arch --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.17.json
  smpatch apply sm120-fusion --check-arch --sm 12.0         # for a GPU this machine does not have`,
	"revert": `  smpatch revert --repo examples/sample/sglang
  smpatch revert sm120-fusion --repo examples/sample/sglang --json`,
	"new": `  smpatch new my-fusion --repo ~/src/my-sglang --into ~/my-patches
  smpatch new my-fusion --repo ~/src/my-sglang --base v0.5.17 --into ~/my-patches
  smpatch new my-fusion --repo .venv/lib/python3.12/site-packages --wheel sglang-0.5.17-py3-none-any.whl --into ~/my-patches`,
	"import": `  smpatch import fix-gate --git ~/src/sglang --commit 1a2b3c4d5e6f --into ~/my-patches
  smpatch import fix-gate --file 0001-fix-gate.patch --into ~/my-patches
  smpatch import fix-gate --url https://github.com/sgl-project/sglang/pull/32330 --into ~/my-patches`,
	"refresh": `  smpatch refresh my-fusion --repo ~/src/sglang-0.5.18 --catalog ~/my-patches`,
	"status": `  smpatch status --repo examples/sample/sglang
  smpatch status --json`,
	"probe": `  smpatch probe
  smpatch probe -o host.json               # the JSON report, for --probe-file on another machine
  smpatch probe --site-packages .venv/lib/python3.12/site-packages --json
  smpatch probe --scan libflashinfer.so    # the SM targets a binary holds`,
	"checkout": `  smpatch checkout sglang@v0.5.9 --out src/sglang
  smpatch checkout flashinfer@main --out src/flashinfer --json`,
	"check": `  smpatch check --upstream sglang@main
  smpatch check --upstream sglang@main --format junit -o check.xml
  smpatch check --repo src/sglang --range v0.5.6..v0.5.9`,
	"matrix": `  smpatch matrix expand examples/story/matrix.toml --explain
  smpatch matrix render examples/story/matrix.toml --out out/launch`,
	"matrix expand": `  smpatch matrix expand examples/story/matrix.toml
  smpatch matrix expand examples/story/matrix.toml --explain --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.16.json
  smpatch matrix expand examples/story/matrix.toml --format github --shard 1/2`,
	"matrix render": `  smpatch matrix render examples/story/matrix.toml --out out/launch
  smpatch matrix render examples/story/matrix.toml --out out/launch --refs out/images/refs.json`,
	"matrix build": `  smpatch matrix build examples/story/matrix.toml --out out/images
  smpatch matrix build examples/story/matrix.toml --push registry.example.com/smpatch/story`,
	"matrix run": `  smpatch matrix run examples/fake/matrix.toml --dry-run
  smpatch matrix run examples/story/matrix.toml --out out/results
  smpatch matrix run examples/story/matrix.toml --runner docker --refs out/images/refs.json`,
	"image": `  smpatch image apply sm120-fusion --base oci:out/demo-image/base --out oci:out/demo-image/images:fusion
  smpatch image show oci:out/demo-image/images:fusion   # after make demo-image`,
	"image apply": `  smpatch image apply sm120-fusion --base oci:out/demo-image/base --out oci:out/demo-image/images:fusion
  smpatch image apply sm120-fusion --base lmsysorg/sglang:v0.5.9 --out registry.example.com/sglang:sm120`,
	"image show": `  smpatch image show oci:out/demo-image/images:fusion   # after make demo-image
  smpatch image show lmsysorg/sglang:v0.5.9 --json`,
	"journal": `  smpatch journal trust --repo vendor/sglang
  smpatch journal forget sm120-fusion --repo vendor/sglang`,
	"journal trust": `  smpatch journal trust --repo vendor/sglang     # a journal copied from elsewhere, after checking it
  smpatch journal trust --repo vendor/sglang --json`,
	"journal forget": `  smpatch journal forget sm120-fusion --repo vendor/sglang`,
	"matrix compare": `  smpatch matrix compare out/results
  smpatch matrix compare out/results --pair unpatched.fewchan.cgbs128:sm120-fusion.fewchan.cgbs128
  smpatch matrix compare out/results --baseline unpatched.default.cgbs512 --json`,
	"triage": `  smpatch triage out/results/logs/*.log
  smpatch triage server.log --json`,
	"version": `  smpatch version
  smpatch version --json`,
}

// rootLong is the root command's help text: what smpatch is and where
// to read more.
const rootLong = `smpatch applies, checks and reverts source patches for sglang and flashinfer
on GPUs upstream does not fully support yet, and runs matrices of variants.

Docs: README.md (quick start, commands, exit codes) and docs/*.md in the
repository: docs/engine.md (apply, revert, status), docs/probe.md,
docs/upstream.md (check, checkout), docs/matrix.md, docs/image.md,
docs/launch.md (matrix run, triage). 'smpatch help COMMAND' shows a command's
flags and examples.`

// addExamples sets the Example of every command from the table above.
func addExamples(c *cobra.Command) {
	if ex, ok := examples[cmdName(c)]; ok && c.Example == "" {
		c.Example = ex
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
