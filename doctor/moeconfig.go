package doctor

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// The fused-MoE Triton config module, where each sglang release keeps it.
var moeConfigModules = []string{
	"python/sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py",
	"python/sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_config.py",
}

// moeNameRe is the file name get_config_file_name builds, in the shape
// every release since 0.5.8 has.
var moeNameRe = lazyre.New(`return f"E=\{E\},N=\{N\},device_name=\{device_name\}\{dtype_selector\}\{block_shape_selector\}(\{per_channel_quant_selector\})?(\{down_moe_selector\})?\.json"`)

// moeConfigFacts works out the tuned fused-MoE config file the tree's
// code would look for on these GPUs (moe.config.file), where
// (moe.config.dir), and whether it is there: moe.config is "tuned" (for
// the installed Triton), "other-triton" (only for another Triton
// version: sglang falls back to it), "found" (there, Triton unknown) or
// "none" (sglang uses its default config).
func moeConfigFacts(f *Facts, tr *treeReader) {
	experts, ok := number(f, "model.experts")
	if !ok {
		if v, known, _ := f.Lookup("model.experts"); known && len(v.Vals) == 0 {
			f.none("moe.config", "not a MoE model (config.json names no experts)")
			return
		}
		f.unknownBecause("moe", "the model's expert count is unknown")
		return
	}
	var module string
	var line int
	var src []byte
	for _, m := range moeConfigModules {
		if data, err := tr.t.ReadFile(m); err == nil {
			module, src = m, data
			break
		}
	}
	if module == "" {
		f.unknownBecause("moe", "no fused_moe_triton_config.py in this tree")
		return
	}
	if loc := moeNameRe().FindIndex(src); loc != nil {
		line = lineAt(src, loc[0])
	} else {
		f.unknownBecause("moe", module+": get_config_file_name builds a name doctor does not know")
		return
	}
	inter, iok := number(f, "model.moe_intermediate_size")
	if !iok {
		inter, iok = number(f, "model.intermediate_size")
	}
	tp, tok := number(f, "flag.tp_size")
	ep, eok := number(f, "flag.ep_size")
	names := f.known["gpu.name"].Vals
	switch {
	case !iok:
		f.unknownBecause("moe", "the model's expert intermediate size is unknown")
		return
	case !tok || !eok:
		f.unknownBecause("moe", "the launch's tp_size or ep_size is unknown")
		return
	case len(names) == 0:
		f.unknownBecause("moe", "the GPU's name is unknown")
		return
	}
	if ep < 1 || tp < ep {
		ep = 1
	}
	dtype, block, err := moeDtype(f)
	if err != nil {
		f.unknownBecause("moe", err.Error())
		return
	}
	e := int(experts / ep)
	n := int(inter / (tp / ep))
	device := strings.ReplaceAll(names[0], " ", "_")
	name := fmt.Sprintf("E=%d,N=%d,device_name=%s%s%s.json", e, n, device, dtype, block)
	dir := path.Join(path.Dir(module), "configs")
	from := fmt.Sprintf("%s:%d, E=%s/ep_size, N=%s/(tp_size/ep_size), device %q", module, line, f.known["model.experts"].From, "intermediate size", names[0])
	f.set("moe.config.file", from, name)
	if env := f.first("env.SGLANG_MOE_CONFIG_DIR"); env != "" {
		dir = path.Join(env, "configs")
		f.set("moe.config.dir", "SGLANG_MOE_CONFIG_DIR", dir)
		moeStatusLocal(f, dir, name)
		return
	}
	f.set("moe.config.dir", module, dir)
	files, err := tr.t.ListFiles(dir)
	if err != nil {
		f.unknownBecause("moe.config", fmt.Sprintf("%s: %v", dir, err))
		return
	}
	var found []string
	for _, rel := range files {
		if path.Base(rel) == name {
			found = append(found, path.Base(path.Dir(rel)))
		}
	}
	moeStatus(f, dir, name, found)
}

// moeStatusLocal is moeStatus for a config directory on this machine
// (SGLANG_MOE_CONFIG_DIR).
func moeStatusLocal(f *Facts, dir, name string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		f.unknownBecause("moe.config", fmt.Sprintf("SGLANG_MOE_CONFIG_DIR: %v", err))
		return
	}
	var found []string
	for _, e := range ents {
		if _, err := os.Stat(path.Join(dir, e.Name(), name)); err == nil {
			found = append(found, e.Name())
		}
	}
	moeStatus(f, dir, name, found)
}

func moeStatus(f *Facts, dir, name string, found []string) {
	slices.Sort(found)
	want := ""
	if tv := f.first("triton.version"); tv != "" {
		want = "triton_" + strings.ReplaceAll(strings.SplitN(tv, "+", 2)[0], ".", "_")
	}
	switch {
	case len(found) == 0:
		f.set("moe.config", fmt.Sprintf("%s/triton_*/: no %s", dir, name), "none")
	case want != "" && slices.Contains(found, want):
		f.set("moe.config", fmt.Sprintf("%s/%s/%s", dir, want, name), "tuned")
	case want != "":
		f.set("moe.config", fmt.Sprintf("%s/{%s}/%s, not %s", dir, strings.Join(found, ","), name, want), "other-triton")
	default:
		f.set("moe.config", fmt.Sprintf("%s/{%s}/%s (the installed Triton is unknown)", dir, strings.Join(found, ","), name), "found")
	}
}

// moeDtype is the dtype and block-shape parts of the name, from the
// launch's --quantization or else the model's.
func moeDtype(f *Facts) (dtype, block string, err error) {
	q := f.first("flag.quantization")
	if q == "" {
		if _, ok, _ := f.Lookup("model.quantization"); !ok {
			return "", "", fmt.Errorf("the model's quantization is unknown")
		}
		q = f.first("model.quantization")
	}
	switch q {
	case "none":
		return "", "", nil
	case "fp8", "w8a8_fp8":
		dtype = ",dtype=fp8_w8a8"
	case "w8a8_int8":
		dtype = ",dtype=int8_w8a8"
	default:
		return "", "", fmt.Errorf("doctor does not know which fused-MoE dtype quantization %s uses", q)
	}
	if bs := f.known["model.weight_block_size"].Vals; len(bs) == 2 && q == "fp8" {
		a, err1 := strconv.Atoi(bs[0])
		b, err2 := strconv.Atoi(bs[1])
		if err1 == nil && err2 == nil && a != 0 && b != 0 {
			block = fmt.Sprintf(",block_shape=[%d, %d]", a, b)
		}
	}
	return dtype, block, nil
}
