package patches

// FileDiff is one file's section of a unified diff.
type FileDiff struct {
	OldPath string // repository-relative, "a/" stripped; "" for /dev/null
	NewPath string // repository-relative, "b/" stripped; "" for /dev/null
	Hunks   []*Hunk
	// Source and Line locate the "diff --git" (or "---") line for errors.
	Source string
	Line   int
}

// Hunk is one @@ section.
type Hunk struct {
	OldStart, OldLines int
	NewStart, NewLines int
	Section            string // text after the closing @@
	// Lines are the body lines without their leading ' ', '-' or '+' and
	// without line endings; Ops holds that leading byte for each.
	Lines []string
	Ops   []byte
	// NoNewlineOld/New record "\ No newline at end of file" after the last
	// old or new line.
	NoNewlineOld, NoNewlineNew bool
	Line                       int // line of the @@ header in Source
}
