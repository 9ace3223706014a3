package patches

import (
	"bytes"
	"fmt"
)

// contextLines is the context a generated diff carries around each change.
const contextLines = 3

// maxDiffCells bounds the quadratic line diff; beyond it the differing
// middle of a file is shown as removed and added wholesale.
const maxDiffCells = 16 << 20

// lineOp is one line of a line diff: ' ', '-' or '+', with the index of the
// line in the old or new file.
type lineOp struct {
	op       byte
	oldI, nw int
}

// diffLines returns a minimal line diff of a and b (lines with endings).
func diffLines(a, b [][]byte) []lineOp {
	pre := 0
	for pre < len(a) && pre < len(b) && bytes.Equal(a[pre], b[pre]) {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && bytes.Equal(a[len(a)-1-suf], b[len(b)-1-suf]) {
		suf++
	}
	var ops []lineOp
	for i := 0; i < pre; i++ {
		ops = append(ops, lineOp{' ', i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(ma)*len(mb) > maxDiffCells {
		for i := range ma {
			ops = append(ops, lineOp{'-', pre + i, -1})
		}
		for j := range mb {
			ops = append(ops, lineOp{'+', -1, pre + j})
		}
	} else {
		// Intern lines so the table compares ints.
		ids := map[string]int{}
		id := func(l []byte) int {
			k := string(l)
			v, ok := ids[k]
			if !ok {
				v = len(ids)
				ids[k] = v
			}
			return v
		}
		ia, ib := make([]int, len(ma)), make([]int, len(mb))
		for i, l := range ma {
			ia[i] = id(l)
		}
		for j, l := range mb {
			ib[j] = id(l)
		}
		w := len(mb) + 1
		dp := make([]int32, (len(ma)+1)*w)
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ia[i] == ib[j] {
					dp[i*w+j] = dp[(i+1)*w+j+1] + 1
				} else {
					dp[i*w+j] = max(dp[(i+1)*w+j], dp[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ia[i] == ib[j]:
				ops = append(ops, lineOp{' ', pre + i, pre + j})
				i++
				j++
			case j >= len(mb) || (i < len(ma) && dp[(i+1)*w+j] >= dp[i*w+j+1]):
				ops = append(ops, lineOp{'-', pre + i, -1})
				i++
			default:
				ops = append(ops, lineOp{'+', -1, pre + j})
				j++
			}
		}
	}
	for k := 0; k < suf; k++ {
		ops = append(ops, lineOp{' ', len(a) - suf + k, len(b) - suf + k})
	}
	return ops
}

// unifiedFileDiff formats the diff of one file, git style. existed and
// keeps say whether the file exists before and after.
func unifiedFileDiff(path string, old, nw []byte, existed, keeps bool) []byte {
	a, b := splitKeep(old), splitKeep(nw)
	ops := diffLines(a, b)
	var out bytes.Buffer
	fmt.Fprintf(&out, "diff --git a/%s b/%s\n", path, path)
	oldName, newName := "a/"+path, "b/"+path
	switch {
	case !existed:
		out.WriteString("new file mode 100644\n")
		oldName = "/dev/null"
	case !keeps:
		out.WriteString("deleted file mode 100644\n")
		newName = "/dev/null"
	}
	if len(a) == 0 && len(b) == 0 {
		return out.Bytes()
	}
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
	// Group changes into hunks with contextLines of context.
	for k := 0; k < len(ops); {
		for k < len(ops) && ops[k].op == ' ' {
			k++
		}
		if k == len(ops) {
			break
		}
		start := max(0, k-contextLines)
		end := k
		for {
			for end < len(ops) && ops[end].op != ' ' {
				end++
			}
			next := end
			for next < len(ops) && ops[next].op == ' ' {
				next++
			}
			if next == len(ops) || next-end > 2*contextLines {
				end = min(len(ops), end+contextLines)
				break
			}
			end = next
		}
		writeHunk(&out, ops[start:end], a, b)
		k = end
	}
	return out.Bytes()
}

func writeHunk(out *bytes.Buffer, ops []lineOp, a, b [][]byte) {
	oldStart, newStart, oldN, newN := -1, -1, 0, 0
	for _, o := range ops {
		if o.op != '+' {
			if oldStart < 0 {
				oldStart = o.oldI
			}
			oldN++
		}
		if o.op != '-' {
			if newStart < 0 {
				newStart = o.nw
			}
			newN++
		}
	}
	// A side is empty only when the hunk has no context, which happens only
	// when that side's file is empty: it is numbered 0.
	if oldStart < 0 {
		oldStart = 0
	} else {
		oldStart++
	}
	if newStart < 0 {
		newStart = 0
	} else {
		newStart++
	}
	out.WriteString(hunkHeader(oldStart, oldN, newStart, newN, ""))
	for _, o := range ops {
		var line []byte
		if o.op == '+' {
			line = b[o.nw]
		} else {
			line = a[o.oldI]
		}
		out.WriteByte(o.op)
		out.Write(line)
		if !bytes.HasSuffix(line, []byte("\n")) {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}
