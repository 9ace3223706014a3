package patches

// HunkStatus is how one hunk resolved against a tree.
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

// Region is a span of lines in a file, 1-based and inclusive.
type Region struct {
	Start, End int
	Text       string
}

// HunkResult is the resolution of one hunk.
type HunkResult struct {
	Index  int // index of the hunk in its FileDiff
	Status HunkStatus
	Line   int     // 1-based line in the old file where the hunk lands (or was found)
	Offset int     // Line minus the line the hunk states
	Score  float64 // similarity for Fuzzy, 0..1
	Reason string  // for Conflict: why
	// Nearest is the closest candidate region for a conflict.
	Nearest *Region
}

// FilePlan is what a Plan does to one file.
type FilePlan struct {
	Path   string // repository-relative target path (after anchor resolution)
	Diff   *FileDiff
	Old    []byte // nil when the file is created
	New    []byte // nil when the file is deleted
	Create bool
	Delete bool
	Hunks  []HunkResult
}

// Outcome classifies a whole Plan.
type Outcome string

const (
	OutcomeApplies        Outcome = "applies"         // every hunk exact or offset
	OutcomeFuzzy          Outcome = "fuzzy"           // resolves, some hunk fuzzy
	OutcomeAlreadyApplied Outcome = "already-applied" // every hunk already present
	OutcomeConflict       Outcome = "conflict"        // some hunk conflicts
	OutcomeNoVariant      Outcome = "no-variant"      // no variant fits the tree
)
