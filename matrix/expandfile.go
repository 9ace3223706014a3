package matrix

// ExpandFile loads the matrix file and expands it: the one way every
// matrix command reads a file. warn, when set, receives the file's NCCL_*
// names NCCL does not document, one line each, as soon as the file is
// read; opts.CheckPatch, when set, is asked about every patch the patches
// axis names; probeFile, when set, is a probe report whose facts the rules
// read.
func ExpandFile(file, probeFile string, opts ExpandOptions, warn func(string)) (*Expansion, error) {
	m, err := Load(file)
	if err != nil {
		return nil, err
	}
	if warn != nil {
		for _, w := range m.NCCLWarnings() {
			warn(w)
		}
	}
	if opts.CheckPatch != nil {
		if err := m.CheckPatches(opts.CheckPatch); err != nil {
			return nil, err
		}
	}
	if probeFile != "" {
		if opts.Probe, err = ReadProbeFacts(probeFile); err != nil {
			return nil, err
		}
	}
	return m.Expand(opts)
}
