package upstream

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// usesOf reads src and returns the uses by path.
func usesOf(t *testing.T, src string) map[string]PyUse {
	t.Helper()
	out := map[string]PyUse{}
	for _, u := range ReadPyUses([]byte(src), "flashinfer") {
		if _, dup := out[u.Path]; dup {
			t.Fatalf("%s listed twice", u.Path)
		}
		out[u.Path] = u
	}
	return out
}

func paths(m map[string]PyUse) []string {
	var out []string
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func TestReadPyUsesImportsAndCalls(t *testing.T) {
	src := `"""A module that talks about flashinfer.fake in its docstring."""
import os
from flashinfer import (
    merge_state,
    fancy_op as fop,  # flashinfer.not_this in a comment
)
import flashinfer.comm as comm
import flashinfer.norm

_comm = None
try:
    import flashinfer.comm.mnnvl as mnnvl
    _comm = comm
except ImportError:
    pass

create = comm.create_workspace


def run(x):
    s = "flashinfer.fake_in_string()"
    y = fop(x, out=x, scale=2.0)
    flashinfer.norm.rmsnorm(x, weight=x, eps=1e-6)
    kw = dict(input=x, pattern=_comm.Pattern.kAR)
    kw["launch_with_pdl"] = True
    if supports_trigger:
        kw["trigger_completion_at_end"] = True
    _comm.allreduce_fusion(**kw)
    w = create(world_size=2, **extra)
    return mnnvl.Backend
`
	got := usesOf(t, src)
	want := []string{
		"flashinfer.comm", "flashinfer.comm.Pattern.kAR", "flashinfer.comm.allreduce_fusion", "flashinfer.comm.create_workspace",
		"flashinfer.comm.mnnvl", "flashinfer.comm.mnnvl.Backend", "flashinfer.fancy_op", "flashinfer.merge_state",
		"flashinfer.norm", "flashinfer.norm.rmsnorm",
	}
	if !slices.Equal(paths(got), want) {
		t.Fatalf("paths\n got %v\nwant %v", paths(got), want)
	}
	if u := got["flashinfer.fancy_op"]; u.Calls != 1 || !slices.Equal(u.Kwargs, []string{"out", "scale"}) || u.Line != 3 {
		t.Errorf("fancy_op: %+v", u)
	}
	if u := got["flashinfer.norm.rmsnorm"]; !slices.Equal(u.Kwargs, []string{"eps", "weight"}) {
		t.Errorf("rmsnorm: %+v", u)
	}
	u := got["flashinfer.comm.allreduce_fusion"]
	if !slices.Equal(u.Kwargs, []string{"input", "launch_with_pdl", "pattern"}) || !slices.Equal(u.Guarded, []string{"trigger_completion_at_end"}) || len(u.Unread) != 0 {
		t.Errorf("allreduce_fusion through **kw: %+v", u)
	}
	if u := got["flashinfer.comm.create_workspace"]; !slices.Equal(u.Kwargs, []string{"world_size"}) || !slices.Equal(u.Unread, []string{"**extra"}) {
		t.Errorf("create_workspace: %+v", u)
	}
	if !got["flashinfer.comm.mnnvl"].Tried || got["flashinfer.comm"].Tried || got["flashinfer.comm.mnnvl.Backend"].Tried {
		t.Errorf("tried: mnnvl import %v, comm %v, mnnvl.Backend %v", got["flashinfer.comm.mnnvl"].Tried, got["flashinfer.comm"].Tried, got["flashinfer.comm.mnnvl.Backend"].Tried)
	}
}

// A name imported in one def from flashinfer and in another from elsewhere
// stands for each in its own def only.
func TestReadPyUsesScopes(t *testing.T) {
	src := `
def ours(x, w):
    from sglang.jit_kernel.norm import rmsnorm

    rmsnorm(x, w, output=x)


def theirs(x, w):
    from flashinfer.norm import rmsnorm

    rmsnorm(x, w, out=x)


def nested():
    from flashinfer import outer_op

    def inner():
        return outer_op(k=1)

    return inner


def unrelated():
    return outer_op(z=2)


def set_global():
    global _mod
    import flashinfer.comm as c
    _mod = c


def later():
    return _mod.fn(a=1)
`
	got := usesOf(t, src)
	if u := got["flashinfer.norm.rmsnorm"]; u.Calls != 1 || !slices.Equal(u.Kwargs, []string{"out"}) {
		t.Errorf("rmsnorm: %+v (the other def's call is not flashinfer's)", u)
	}
	if u := got["flashinfer.outer_op"]; u.Calls != 1 || !slices.Equal(u.Kwargs, []string{"k"}) {
		t.Errorf("outer_op: %+v (seen in the nested def, not in unrelated)", u)
	}
	if u, ok := got["flashinfer.comm.fn"]; !ok || !slices.Equal(u.Kwargs, []string{"a"}) {
		t.Errorf("a global assigned in a def: %+v", got)
	}
}

func TestReadPyUsesNothing(t *testing.T) {
	for _, src := range []string{
		"",
		"import os\n",
		"# flashinfer\nx = 'flashinfer.comm'\n",
		"from sglang.srt.layers.flashinfer_comm_fusion import x\nx.flashinfer()\n",
		"def is_flashinfer_available():\n    return flashinfer\n",
	} {
		if got := ReadPyUses([]byte(src), "flashinfer"); len(got) != 0 {
			t.Errorf("%q: %+v", src, got)
		}
	}
}

func TestBlankPython(t *testing.T) {
	src := "a = 'x#y' # c\nb = \"\"\"q\n'''\n\"\"\" + r'\\'' + f\"{z}\"\nc = 'open\nd = 1\n"
	got := string(blankPython([]byte(src)))
	want := "a = '   '    \nb = \"\"\" \n   \n\"\"\" + r'  ' + f\"   \"\nc = '    \nd = 1\n"
	if got != want {
		t.Fatalf("blank\n got %q\nwant %q", got, want)
	}
}

func TestPySourceLines(t *testing.T) {
	s := newPySource([]byte("class A:\n    x = (1,\n         2)\n    def f(self):\n        try:\n            y = 1\n        except E:\n            pass\nz = 3 \\\n  + 4\n"))
	var texts []string
	for _, l := range s.lines {
		texts = append(texts, l.text)
	}
	want := []string{"class A:", "x = (1,          2)", "def f(self):", "try:", "y = 1", "except E:", "pass", "z = 3    + 4"}
	if !slices.Equal(texts, want) {
		t.Fatalf("lines\n got %q\nwant %q", texts, want)
	}
	if s.lines[1].scope != 0 || s.lines[4].scope != 2 || s.lines[7].scope != -1 {
		t.Errorf("scopes: %+v", s.lines)
	}
	if !s.inTry(4) || s.inTry(6) || s.inTry(1) {
		t.Errorf("inTry: y=%v pass=%v x=%v", s.inTry(4), s.inTry(6), s.inTry(1))
	}
	if s.enclosingDef(4) != 2 || s.enclosingDef(1) != -1 {
		t.Errorf("enclosingDef")
	}
}

// FuzzReadPyUses: any text is read without a panic, every path is under the
// package and every line is one of the file's.
func FuzzReadPyUses(f *testing.F) {
	f.Add([]byte("import flashinfer.comm as c\nc.x(a=1, **k)\n"))
	f.Add([]byte("from flashinfer import (a as b,\n c)\ndef f():\n    kw = {'x': 1}\n    b(**kw)\n"))
	f.Add([]byte("from flashinfer import *\nflashinfer = 1\n\"\"\"unterminated"))
	f.Add([]byte("import flashinfer\nflashinfer.a.b.c(d=(1, 2), e=[3])\nx = flashinfer\ny = x.z\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		lines := bytes.Count(src, []byte("\n")) + 1
		for _, u := range ReadPyUses(src, "flashinfer") {
			if u.Path != "flashinfer" && !strings.HasPrefix(u.Path, "flashinfer.") || !isDotted(u.Path) {
				t.Fatalf("path %q", u.Path)
			}
			if u.Line < 1 || u.Line > lines {
				t.Fatalf("line %d of %d", u.Line, lines)
			}
		}
		if b := blankPython(src); len(b) != len(src) || bytes.Count(b, []byte("\n")) != bytes.Count(src, []byte("\n")) {
			t.Fatalf("blankPython changed the length or the lines")
		}
	})
}

// FuzzReadPyModule: any text is read as a module without a panic, and a
// name looked up in it resolves to one of the three states.
func FuzzReadPyModule(f *testing.F) {
	f.Add([]byte("from .a import *\nfrom . import b as b\nclass C(Base):\n    x = 1\n    def __init__(self, p, /, q, *, r=1, **kw):\n        self.s = 2\n"))
	f.Add([]byte("def __getattr__(name):\n    pass\nimport flashinfer.comm as comm\nfrom .. import up\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		pkg := newPyPackage("flashinfer", "flashinfer", []string{"flashinfer/__init__.py", "flashinfer/a.py"}, func(string) ([]byte, error) { return src, nil })
		for _, p := range []string{"flashinfer", "flashinfer.C", "flashinfer.C.x", "flashinfer.b.z", "flashinfer.a.C.s", "flashinfer.comm.y"} {
			switch r := pkg.resolve(p); r.State {
			case Present, Missing, Unknown:
			default:
				t.Fatalf("%s: state %q", p, r.State)
			}
		}
	})
}
