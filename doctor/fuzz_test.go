package doctor

import (
	"strings"
	"testing"
)

// FuzzParseRule: any bytes as a rule file decode to a checked rule or an
// error, and a rule that loads can be decided on empty facts.
func FuzzParseRule(f *testing.F) {
	for _, name := range []string{"deepgemm-sm121", "custom-ar-expandable-segments", "triton-ptxas"} {
		data, err := builtinRules.ReadFile("rules/" + name + ".toml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("title = \"t\"\nseverity = \"info\"\nhappens = \"h\"\nsources = [\"https://x\"]\n[[when]]\nany = [{ fact = \"gpu.sm\", in = [\"12.0\"] }, { file = \"a\", regex = \"(\" }]\n[[remedy]]\nflag = \"--x\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRule("fuzz.toml", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		e := newEvaluator(newFacts(), nil, "fuzz")
		e.rule(r)
		_ = r.Conditions()
	})
}

// FuzzParseConfig: a config.json is an object or an error, and its facts
// never panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(fp8MoE))
	f.Add([]byte(`{"architectures": ["A"], "text_config": {"quantization_config": {"quant_algo": 3}}, "num_experts": [1, {"a": 2}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		m := &Model{Config: cfg}
		if archs, err := m.Architectures(); err == nil {
			m.addFacts(newFacts(), archs)
		}
	})
}

// FuzzServerArgs: any Python source either gives flags or an error, and
// any launch arguments parse against the synthetic trees' flags.
func FuzzServerArgs(f *testing.F) {
	for _, shape := range []string{"argparse", "annotated"} {
		tree, _ := synthTree(f, shape)
		data, err := tree.ReadFile(ServerArgsFile)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "--model m --tp 2 --cuda-graph-bs 1 2 --x=")
	}
	f.Add([]byte("class ServerArgs:\n    a: A[str, Arg(aliases=[\"--b\"\n"), "--b")
	f.Add([]byte("class ServerArgs:\n    x: int = (\n\"\"\"\n"), "-- -1 --x -1")
	f.Fuzz(func(t *testing.T, src []byte, args string) {
		sa, err := ParseServerArgs(src)
		if err != nil {
			return
		}
		p := sa.Parse(strings.Fields(args))
		_ = sa.missingRequired(p)
	})
}

// FuzzParseLaunch: any words are a launch or a NotSGLangError.
func FuzzParseLaunch(f *testing.F) {
	f.Add("A=1 python3 -X dev -m sglang.launch_server --tp 2")
	f.Add("sglang serve m --model-type")
	f.Add("env -i python -m")
	f.Fuzz(func(t *testing.T, line string) {
		l, err := ParseLaunch(strings.Fields(line))
		if err == nil && l.Entry == "" {
			t.Fatal("a launch without an entry")
		}
	})
}
