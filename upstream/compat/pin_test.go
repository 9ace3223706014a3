package compat

import (
	"testing"
)

func TestParseRequirement(t *testing.T) {
	tests := []struct {
		req, name, version string
		exact              bool
	}{
		{"flashinfer_python==0.6.1", "flashinfer-python", "0.6.1", true},
		{"flashinfer_python[cu13]==0.6.12", "flashinfer-python", "0.6.12", true},
		{" Flashinfer.Python [cu12, x] == 0.6.7.post2 ; sys_platform == 'linux'", "flashinfer-python", "0.6.7.post2", true},
		{"flashinfer-python (==0.6.3)", "flashinfer-python", "0.6.3", true},
		{"flashinfer_python===0.6.18rc7", "flashinfer-python", "0.6.18rc7", true},
		{"flashinfer_python>=0.6.1", "flashinfer-python", "", false},
		{"flashinfer_python==0.6.*", "flashinfer-python", "", false},
		{"flashinfer_python>=0.6,<0.7", "flashinfer-python", "", false},
		{"flashinfer_python==banana", "flashinfer-python", "", false},
		{"flashinfer_cubin==0.6.1", "flashinfer-cubin", "0.6.1", true},
		{"", "", "", false},
		{"==0.6.1", "", "", false},
	}
	for _, tc := range tests {
		n, v, e := ParseRequirement(tc.req)
		if n != tc.name || v != tc.version || e != tc.exact {
			t.Errorf("ParseRequirement(%q) = %q %q %v, want %q %q %v", tc.req, n, v, e, tc.name, tc.version, tc.exact)
		}
	}
}

func TestReadPyprojectPin(t *testing.T) {
	data := []byte(`[project]
name = "sglang"
dependencies = [
  "torch==2.9.1",
  # "flashinfer_python==0.0.1", a comment is no requirement
  "flashinfer_python[cu13]==0.6.12", # keep it aligned with jit-cache version in Dockerfile
  "flashinfer_cubin==0.6.12",
]

[project.optional-dependencies]
test = ["flashinfer-jit-cache==0.6.11"]
`)
	p, err := ReadPyprojectPin(data, "python/pyproject.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Pin{FlashInfer: "0.6.12", Spec: "flashinfer_python[cu13]==0.6.12", FlashInferFrom: "python/pyproject.toml:6",
		Cubin: "0.6.12", CubinFrom: "python/pyproject.toml:7", JITCache: "0.6.11", JITCacheFrom: "python/pyproject.toml:11"}
	if p != want {
		t.Errorf("pin\n got %+v\nwant %+v", p, want)
	}
	if p, err := ReadPyprojectPin([]byte("[project]\nname = \"x\"\n"), "f"); err != nil || p != (Pin{}) {
		t.Errorf("no flashinfer: %+v %v", p, err)
	}
	if _, err := ReadPyprojectPin([]byte("[project\n"), "python/pyproject.toml"); err == nil {
		t.Error("not TOML: no error")
	}
	// Only a lower bound: the spec, no exact version.
	p, _ = ReadPyprojectPin([]byte("[project]\ndependencies = [\"flashinfer_python>=0.6.1\"]\n"), "f")
	if p.FlashInfer != "" || p.Spec != "flashinfer_python>=0.6.1" {
		t.Errorf("a lower bound: %+v", p)
	}
}

func TestPinFromRequires(t *testing.T) {
	p := PinFromRequires([]string{"torch==2.9.1", "flashinfer_python[cu13]==0.6.12", "flashinfer_cubin==0.6.12; extra == \"srt\""}, "sglang-0.5.14.dist-info/METADATA")
	if p.FlashInfer != "0.6.12" || p.Cubin != "0.6.12" || p.FlashInferFrom != "sglang-0.5.14.dist-info/METADATA" {
		t.Errorf("%+v", p)
	}
}

func TestReadDockerfilePin(t *testing.T) {
	data := []byte(`ARG CUDA_VERSION=12.9.1
ARG FLASHINFER_VERSION=0.6.17
FROM base
ARG FLASHINFER_VERSION
RUN python3 -m pip install flashinfer-cubin==${FLASHINFER_VERSION} --index-url https://flashinfer.ai/whl \
    && python3 -m pip install flashinfer-jit-cache==${FLASHINFER_VERSION} --index-url https://flashinfer.ai/whl/cu129
`)
	p := Pin{Cubin: "0.6.16", CubinFrom: "python/pyproject.toml:7"}
	ReadDockerfilePin(&p, data, "docker/Dockerfile")
	if p.JITCache != "0.6.17" || p.JITCacheFrom != "docker/Dockerfile:6 (ARG FLASHINFER_VERSION at line 2)" || p.Cubin != "0.6.16" {
		t.Errorf("%+v (the pyproject's cubin pin stays)", p)
	}
	p = Pin{}
	ReadDockerfilePin(&p, []byte("RUN pip install flashinfer-jit-cache==${FLASHINFER_VERSION}\n"), "docker/Dockerfile")
	if p != (Pin{}) {
		t.Errorf("no ARG default: %+v", p)
	}
}

// FuzzPins: the pin readers take any text without a panic, and a version
// they report parses.
func FuzzPins(f *testing.F) {
	f.Add([]byte("[project]\ndependencies = [\"flashinfer_python[cu13]==0.6.12\"]\n"), "flashinfer_python==0.6.1 ; x")
	f.Add([]byte("ARG FLASHINFER_VERSION=0.6.17\nRUN pip install flashinfer-jit-cache==${FLASHINFER_VERSION}\n"), "flashinfer-cubin (==1)")
	f.Fuzz(func(t *testing.T, data []byte, req string) {
		p, _ := ReadPyprojectPin(data, "f")
		ReadDockerfilePin(&p, data, "d")
		p2 := PinFromRequires([]string{req, string(data)}, "m")
		for _, v := range []string{p.FlashInfer, p.Cubin, p.JITCache, p2.FlashInfer, p2.Cubin, p2.JITCache} {
			if v == "" {
				continue
			}
			if _, _, ok := ParseRequirement("x==" + v); !ok {
				t.Fatalf("reported version %q does not parse", v)
			}
		}
	})
}
