package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/bounded"
)

// MaxConfig bounds a model's config.json (and hf_quant_config.json): real
// ones are a few KiB, the largest tens.
const MaxConfig = 4 << 20

// Model is what doctor reads of a model directory: config.json, and
// hf_quant_config.json when there is one (ModelOpt checkpoints).
type Model struct {
	Dir    string
	Config map[string]any
	Quant  map[string]any // hf_quant_config.json, nil when absent
}

// ReadModel reads dir/config.json (and dir/hf_quant_config.json).
func ReadModel(dir string) (*Model, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		kind := "a file"
		if !st.Mode().IsRegular() {
			kind = bounded.Kind(st.Mode())
		}
		return nil, &InputError{Where: dir, Why: "not a model directory (" + kind + ")"}
	}
	cfgPath := filepath.Join(dir, "config.json")
	data, err := bounded.ReadFile(nil, cfgPath, MaxConfig)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
				return nil, &InputError{Where: dir, Why: "not a model directory"}
			}
			return nil, &InputError{Where: cfgPath, Why: "no config.json in the model directory"}
		}
		return nil, &InputError{Where: cfgPath, Why: strings.TrimPrefix(err.Error(), cfgPath+": ")}
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, &InputError{Where: cfgPath, Why: err.Error()}
	}
	m := &Model{Dir: dir, Config: cfg}
	qPath := filepath.Join(dir, "hf_quant_config.json")
	if qd, err := bounded.ReadFile(nil, qPath, MaxConfig); err == nil {
		q, err := ParseConfig(qd)
		if err != nil {
			return nil, &InputError{Where: qPath, Why: err.Error()}
		}
		m.Quant = q
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, &InputError{Where: qPath, Why: strings.TrimPrefix(err.Error(), qPath+": ")}
	}
	return m, nil
}

// ParseConfig decodes a config.json: one JSON object.
func ParseConfig(data []byte) (map[string]any, error) {
	if len(data) > MaxConfig {
		return nil, fmt.Errorf("%d bytes, more than the %d MiB a model config may have", len(data), MaxConfig>>20)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return nil, errors.New("not JSON: more after the object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object but %s", jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// Architectures are config.json's "architectures".
func (m *Model) Architectures() ([]string, error) {
	raw, ok := m.Config["architectures"]
	if !ok {
		return nil, errors.New(`no "architectures" list`)
	}
	list, ok := raw.([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New(`"architectures" is not a list of names`)
	}
	var out []string
	for _, a := range list {
		s, ok := a.(string)
		if !ok || s == "" {
			return nil, errors.New(`"architectures" is not a list of names`)
		}
		out = append(out, s)
	}
	return out, nil
}

// field is a config field, from the top level or else text_config (the
// language model of a multimodal config, which sglang reads as
// hf_text_config); from says which.
func (m *Model) field(name string) (v any, from string, ok bool) {
	if v, ok := m.Config[name]; ok && v != nil {
		return v, "config.json " + name, true
	}
	if tc, ok := m.Config["text_config"].(map[string]any); ok {
		if v, ok := tc[name]; ok && v != nil {
			return v, "config.json text_config." + name, true
		}
	}
	return nil, "", false
}

// scalar is a JSON value as a fact's strings: numbers as written, a list
// as its elements.
func scalar(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case json.Number:
		return []string{v.String()}
	case bool:
		return []string{strconv.FormatBool(v)}
	case []any:
		var out []string
		for _, e := range v {
			if s := scalar(e); len(s) == 1 {
				out = append(out, s[0])
			}
		}
		return out
	}
	return nil
}

// modelFields are the config fields doctor's rules read, as model.NAME.
var modelFields = []string{
	"model_type", "torch_dtype", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
	"intermediate_size", "moe_intermediate_size", "num_hidden_layers", "kv_lora_rank", "q_lora_rank",
	"qk_rope_head_dim", "index_topk", "num_experts_per_tok", "n_shared_experts",
}

// addFacts records the model's facts.
func (m *Model) addFacts(f *Facts, archs []string) {
	from := "config.json"
	f.set("model.architectures", from+" architectures", archs...)
	for _, name := range modelFields {
		if v, src, ok := m.field(name); ok {
			f.set("model."+name, src, scalar(v)...)
		} else {
			f.none("model."+name, "config.json has no "+name)
		}
	}
	// The expert count each model family reads (sglang's models use one
	// of these fields).
	f.none("model.experts", "config.json has none of n_routed_experts, num_experts, num_local_experts")
	for _, name := range []string{"n_routed_experts", "num_experts", "num_local_experts"} {
		if v, src, ok := m.field(name); ok {
			f.set("model.experts", src, scalar(v)...)
			break
		}
	}
	m.quantFacts(f)
}

// quantFacts are the model's quantization as sglang's ModelConfig reads
// it: quantization_config (ModelOpt when it names no quant_method or
// names modelopt), else compression_config (compressed-tensors), else a
// standalone hf_quant_config.json (ModelOpt).
func (m *Model) quantFacts(f *Facts) {
	qc, _ := m.Config["quantization_config"].(map[string]any)
	if qc == nil {
		if tc, ok := m.Config["text_config"].(map[string]any); ok {
			qc, _ = tc["quantization_config"].(map[string]any)
		}
	}
	var method, algo, from string
	switch {
	case qc != nil:
		from = "config.json quantization_config"
		method, _ = qc["quant_method"].(string)
		algo, _ = qc["quant_algo"].(string)
		if q, ok := qc["quantization"].(map[string]any); ok && algo == "" {
			algo, _ = q["quant_algo"].(string)
		}
		if method == "" {
			method = "modelopt"
		}
		if bs, ok := qc["weight_block_size"]; ok && bs != nil {
			f.set("model.weight_block_size", from+".weight_block_size", scalar(bs)...)
		}
	case m.Config["compression_config"] != nil:
		from, method = "config.json compression_config", "compressed-tensors"
	case m.Quant != nil:
		from, method = "hf_quant_config.json", "modelopt"
		if q, ok := m.Quant["quantization"].(map[string]any); ok {
			algo, _ = q["quant_algo"].(string)
		}
	}
	if _, ok := f.known["model.weight_block_size"]; !ok {
		f.none("model.weight_block_size", "no quantization_config.weight_block_size")
	}
	if method == "" {
		f.none("model.quant_method", "config.json has no quantization_config, compression_config, nor hf_quant_config.json")
		f.set("model.quantization", "unquantized (no quantization_config)", "none")
		f.none("model.quant_algo", "unquantized")
		return
	}
	method = strings.ToLower(method)
	f.set("model.quant_method", from, method)
	if algo != "" {
		f.set("model.quant_algo", from, algo)
	} else {
		f.none("model.quant_algo", from+" has no quant_algo")
	}
	q := method
	if method == "modelopt" {
		u := strings.ToUpper(algo)
		switch {
		case u == "MIXED_PRECISION":
			q = "modelopt_mixed"
		case strings.Contains(u, "FP4"):
			q = "modelopt_fp4"
		case u == "MXFP8":
			q = "mxfp8"
		case strings.Contains(u, "FP8"):
			q = "modelopt_fp8"
		}
	}
	f.set("model.quantization", from+" (quant_method "+method+quoteAlgo(algo)+")", q)
}

func quoteAlgo(a string) string {
	if a == "" {
		return ""
	}
	return ", quant_algo " + a
}

// sortedKeys is m's keys in order (for stable output).
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
