package udiff

import "fmt"

// HunkStatus is how one hunk resolved against a file.
type HunkStatus int

const (
	Exact          HunkStatus = iota // at the stated line
	Offset                           // exact, at the nearest other position
	Fuzzy                            // located by similarity; removed lines match byte for byte
	AlreadyApplied                   // the hunk's result is already where its source would be
	Conflict                         // none of the above
)

func (s HunkStatus) String() string {
	switch s {
	case Exact:
		return "exact"
	case Offset:
		return "offset"
	case Fuzzy:
		return "fuzzy"
	case AlreadyApplied:
		return "already-applied"
	case Conflict:
		return "conflict"
	}
	return "unknown"
}

// MarshalText writes the status as its name in JSON.
func (s HunkStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status name.
func (s *HunkStatus) UnmarshalText(b []byte) error {
	for st := Exact; st <= Conflict; st++ {
		if st.String() == string(b) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("unknown hunk status %q", b)
}

// Region is a span of lines in a file, 1-based and inclusive.
type Region struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	Text  string `json:"text"`
}

// HunkResult is the resolution of one hunk.
type HunkResult struct {
	Path   string     `json:"path"`   // the file's target path (after anchor resolution)
	Index  int        `json:"index"`  // index of the hunk in its FileDiff
	Status HunkStatus `json:"status"` // exact, offset, fuzzy, already-applied, conflict
	Line   int        `json:"line"`   // 1-based line in the old file where the hunk lands (or was found)
	Offset int        `json:"offset"` // Line minus the line the hunk states
	Score  float64    `json:"score"`  // similarity for Fuzzy, 0..1
	Reason string     `json:"reason"` // for Conflict: why; for Fuzzy and AlreadyApplied: detail
	// Nearest is the closest candidate region for a conflict.
	Nearest *Region `json:"nearest"`
}

// Result is how one file diff lands on a file's bytes.
type Result struct {
	Diff   *FileDiff
	Old    []byte // nil when the file does not exist
	New    []byte // nil when the file is deleted, or when a hunk conflicts
	Create bool
	Delete bool
	Hunks  []HunkResult
}

// Conflicts reports whether a hunk of r conflicts.
func (r *Result) Conflicts() bool {
	for _, h := range r.Hunks {
		if h.Status == Conflict {
			return true
		}
	}
	return false
}
