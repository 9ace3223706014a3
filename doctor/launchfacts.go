package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// launchFacts records flag.FIELD for every ServerArgs field: the value
// the launch gives it, else its default when that is a static literal;
// flag.FIELD.given says which. What the tree's parser would refuse is a
// blocker finding of its own.
func launchFacts(f *Facts, tr *treeReader, l *Launch) ([]Finding, error) {
	if tr == nil {
		f.unknownBecause("flag", "no sglang tree: its server_args.py decides how the launch is parsed")
		return nil, nil
	}
	sa, err := tr.serverArgs()
	if err != nil {
		// A tree whose flags cannot be read: say so, decide the rest.
		f.unknownBecause("flag", err.Error())
		return nil, nil
	}
	p := sa.Parse(l.Args)
	problems := append(p.Problems, sa.missingRequired(p)...)
	if p.Config != "" {
		// Flags from a config file are merged in by sglang; doctor does not
		// read them, so no flag is known for sure.
		f.unknownBecause("flag", "the launch reads flags from --config "+p.Config+", which doctor does not read")
		return parseFindings(problems), nil
	}
	for name, fd := range sa.Fields {
		key := "flag." + name
		if vals, ok := p.Given[name]; ok {
			as := "the launch: " + p.As[name]
			if !p.Switch[name] {
				as += " " + strings.Join(vals, " ")
			}
			f.set(key, as, vals...)
			f.set(key+".given", "the launch: "+p.As[name], "true")
			continue
		}
		f.set(key+".given", "not in the launch", "false")
		switch {
		case !fd.Static:
			f.unknownBecause(key, fmt.Sprintf("not in the launch, and its default (%s:%d) is not a static literal", ServerArgsFile, fd.Line))
		case fd.Default.None || len(fd.Default.Vals) == 0:
			f.none(key, defaultFrom(fd))
		default:
			f.set(key, defaultFrom(fd), fd.Default.Vals...)
		}
	}
	f.noField = "not a field of this tree's ServerArgs (" + ServerArgsFile + ")"
	return parseFindings(problems), nil
}

func defaultFrom(fd *Field) string {
	if fd.Line == 0 {
		return "default of its add_argument in " + ServerArgsFile
	}
	return fmt.Sprintf("default, %s:%d", ServerArgsFile, fd.Line)
}

// parseFindings are the launch's parse errors as blockers: sglang's
// argparse exits with them before anything loads.
func parseFindings(problems []string) []Finding {
	var out []Finding
	for _, p := range problems {
		out = append(out, Finding{
			Rule:     "launch-flags",
			Title:    "the launch's flags are not this sglang's",
			Severity: Blocker,
			Happens:  "error: " + p + " (argparse exits with status 2 before the model loads)",
			Evidence: []string{ServerArgsFile + ": the flags this tree declares"},
			Remedies: []string{"fix the launch: the flags of this version are in " + ServerArgsFile + " (python -m sglang.launch_server --help)"},
			Sources:  []string{"https://docs.python.org/3/library/argparse.html#prefix-matching"},
		})
	}
	return out
}

// derivedFacts are facts computed from others the way sglang computes
// them: the attention heads per rank, and the fused-MoE config file.
func derivedFacts(f *Facts, tr *treeReader) {
	heads, hok := number(f, "model.num_attention_heads")
	tp, tok := number(f, "flag.tp_size")
	dpAttn := f.first("flag.enable_dp_attention")
	switch {
	case hok && tok && tp > 0 && dpAttn != "True":
		f.set("attn.heads_per_rank", fmt.Sprintf("num_attention_heads %g / tp_size %g", heads, tp), strconv.FormatFloat(heads/tp, 'g', -1, 64))
	case dpAttn == "True":
		f.unknownBecause("attn.heads_per_rank", "--enable-dp-attention: the attention TP size depends on dp_size")
	default:
		f.unknownBecause("attn.heads_per_rank", "the model's heads or the launch's TP size is unknown")
	}
	if tr != nil {
		moeConfigFacts(f, tr)
	}
}

// number is a fact's first value as a number.
func number(f *Facts, name string) (float64, bool) {
	s := f.first(name)
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseFloat(s, 64)
	return n, err == nil
}
