package upstream

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// fiPackage is a small flashinfer-shaped package: re-exports through
// __init__, a star import, a submodule reached by attribute, classes.
func fiPackage() *pyPackage {
	files := map[string]string{
		"flashinfer/__init__.py": `
from . import jit as jit
from .ops import fancy_op as fancy_op
from .ops import (
    Enumish as Enumish,
)
from .dc import Config
from torch import Tensor
from .gone import nothing_here
`,
		"flashinfer/ops.py": `
import enum


def fancy_op(x, /, out=None, *, scale: float = 1.0):
    pass


class Enumish(enum.IntEnum):
    A = 1
    B: int = 2


class Wrapper(Base):
    def __init__(self, workspace, **kwargs):
        self.backend = "x"

    def run(self):
        pass


class Base:
    base_member = 1
`,
		"flashinfer/dc.py": `
from dataclasses import dataclass


@dataclass
class Config:
    size: int
    name: str = "n"
`,
		"flashinfer/gone.py":          "other = 1\n",
		"flashinfer/jit/__init__.py":  "",
		"flashinfer/jit/env.py":       "CACHE_DIR = '/tmp'\n",
		"flashinfer/comm/__init__.py": "from .impl import *\n",
		"flashinfer/comm/impl.py": `
def allreduce_fusion(input, workspace, pattern, **kwargs):
    pass


if cond:
    def both(a):
        pass
else:
    def both(b):
        pass
`,
		"flashinfer/lazy.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
	}
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return newPyPackage("flashinfer", "flashinfer", paths, func(p string) ([]byte, error) {
		s, ok := files[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return []byte(s), nil
	})
}

func TestPyResolve(t *testing.T) {
	pkg := fiPackage()
	tests := []struct {
		path, state, kind string
		params            []string
		varKw, known      bool
		why               string
	}{
		{path: "flashinfer", state: Present, kind: "module"},
		{path: "flashinfer.fancy_op", state: Present, kind: "function", params: []string{"out", "scale"}, known: true},
		{path: "flashinfer.ops.fancy_op", state: Present, kind: "function", params: []string{"out", "scale"}, known: true},
		{path: "flashinfer.Enumish.A", state: Present, kind: "value"},
		{path: "flashinfer.Enumish.B.value", state: Present, kind: "value", why: "not checked"},
		{path: "flashinfer.Enumish.C", state: Missing, why: "has no member C"},
		{path: "flashinfer.ops.Wrapper", state: Present, kind: "class", params: []string{"workspace"}, varKw: true, known: true},
		{path: "flashinfer.ops.Wrapper.run", state: Present},
		{path: "flashinfer.ops.Wrapper.backend", state: Present},
		{path: "flashinfer.ops.Wrapper.base_member", state: Present},
		{path: "flashinfer.ops.Wrapper.nope", state: Missing},
		{path: "flashinfer.Config", state: Present, kind: "class", params: []string{"size", "name"}, known: true},
		{path: "flashinfer.Tensor", state: Present, kind: "value", why: "re-exported from torch.Tensor"},
		{path: "flashinfer.Tensor.anything", state: Present, why: "outside flashinfer"},
		{path: "flashinfer.nothing_here", state: Missing, why: "imports nothing_here from flashinfer.gone"},
		{path: "flashinfer.jit", state: Present, kind: "module"},
		{path: "flashinfer.jit.env.CACHE_DIR", state: Present, kind: "value"},
		{path: "flashinfer.jit.nope", state: Missing, why: "flashinfer.jit has no name nope"},
		{path: "flashinfer.comm.allreduce_fusion", state: Present, kind: "function", params: []string{"input", "workspace", "pattern"}, varKw: true, known: true},
		{path: "flashinfer.comm.both", state: Present, kind: "function", params: []string{"a", "b"}, known: true},
		{path: "flashinfer.comm.missing_fn", state: Missing},
		{path: "flashinfer.lazy.made_later", state: Unknown, why: "__getattr__"},
		{path: "flashinfer.__version__", state: Present},
		{path: "flashinfer.nomod.x", state: Missing, why: "flashinfer has no name nomod"},
		{path: "torch.x", state: Unknown},
	}
	for _, tc := range tests {
		r := pkg.resolve(tc.path)
		if r.State != tc.state {
			t.Errorf("%s: state %s (%s), want %s", tc.path, r.State, r.Why, tc.state)
			continue
		}
		if tc.kind != "" && r.Kind != tc.kind {
			t.Errorf("%s: kind %s, want %s", tc.path, r.Kind, tc.kind)
		}
		if tc.params != nil {
			got, want := slices.Sorted(slices.Values(r.Params)), slices.Sorted(slices.Values(tc.params))
			if !slices.Equal(got, want) || r.VarKw != tc.varKw || r.Known != tc.known {
				t.Errorf("%s: params %v varKw %v known %v, want %v %v %v", tc.path, r.Params, r.VarKw, r.Known, tc.params, tc.varKw, tc.known)
			}
		}
		if !strings.Contains(r.Why, tc.why) {
			t.Errorf("%s: why %q, want it to say %q", tc.path, r.Why, tc.why)
		}
	}
}

// Re-exports that go round in circles end, unknown.
func TestPyResolveCycle(t *testing.T) {
	files := map[string]string{
		"flashinfer/__init__.py": "from .a import x\n",
		"flashinfer/a.py":        "from .b import x\n",
		"flashinfer/b.py":        "from .a import x\n",
	}
	pkg := newPyPackage("flashinfer", "flashinfer", []string{"flashinfer/__init__.py", "flashinfer/a.py", "flashinfer/b.py"}, func(p string) ([]byte, error) { return []byte(files[p]), nil })
	if r := pkg.resolve("flashinfer.x"); r.State == Present {
		t.Fatalf("a cycle resolved: %+v", r)
	}
}
