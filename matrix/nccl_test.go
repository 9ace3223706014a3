package matrix

import (
	"strings"
	"testing"
)

func TestNCCLWarnings(t *testing.T) {
	src := "[axes]\nn = [\"d\", \"few\"]\n" +
		"[presets.n.d]\nNCCL_ALGO = \"Ring\"\n" +
		"[presets.n.few]\nNCCL_PROTCOL = \"LL\"\nNCCL_GRAPH_FILE = \"/tmp/g.xml\"\nNCCL_ZZZZZZZZZZZZ = \"1\"\n" +
		"[[include]]\nn = \"d\"\nenv = { NCCL_MAX_NCHANELS = \"2\" }\n" +
		"[launch]\ncommand = [\"serve\"]\nenv = { NCCL_DEBUG = \"INFO\", CUDA_VISIBLE_DEVICES = \"0\" }\n"
	m, err := Parse("m.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(m.NCCLWarnings(), "\n")
	for _, want := range []string{
		"m.toml:6: presets.n.few: NCCL_PROTCOL is not an NCCL environment variable; NCCL ignores it (did you mean NCCL_PROTO?)",
		"m.toml:7: presets.n.few: NCCL_GRAPH_FILE is read by NCCL but not documented",
		"presets.n.few: NCCL_ZZZZZZZZZZZZ is not an NCCL environment variable; NCCL ignores it\n",
		"m.toml:9: include[0].env: NCCL_MAX_NCHANELS is not an NCCL environment variable; NCCL ignores it (did you mean NCCL_MAX_NCHANNELS?)",
	} {
		if !strings.Contains(got+"\n", want) {
			t.Errorf("warnings lack %q; got:\n%s", want, got)
		}
	}
	for _, no := range []string{"NCCL_ALGO", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES"} {
		if strings.Contains(got, no) {
			t.Errorf("warned about %s:\n%s", no, got)
		}
	}
}

func TestNCCLVariablesList(t *testing.T) {
	vars := ncclVariables()
	for name, documented := range map[string]bool{
		"NCCL_PROTO": true, "NCCL_ALGO": true, "NCCL_MIN_NCHANNELS": true, "NCCL_BUFFSIZE": true,
		"NCCL_NTHREADS": true, "NCCL_P2P_LEVEL": true, "NCCL_NVLS_ENABLE": true, "NCCL_CUMEM_ENABLE": true,
		"NCCL_GRAPH_FILE": false,
	} {
		d, ok := vars[name]
		if !ok || d != documented {
			t.Errorf("%s: known %v documented %v, want known, documented %v", name, ok, d, documented)
		}
	}
}
