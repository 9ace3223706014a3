// Package matrix reads a TOML matrix of environment variants (axes, presets,
// zip groups, exclude and include entries, a base and a launch template) and
// expands it into cells, pruning or annotating known-bad combinations with
// versioned rules, then renders launch specs for every cell as plain files
// (run.sh, env, sitecustomize.py, an index, a Slurm array script).
//
// The main types are Matrix (a loaded file, see Load), Expansion (the result
// of Matrix.Expand, in the fixed order product → zip → exclude → include →
// rules) and Cell (one variant with a stable, readable id). ExpandFile is
// the one way a command reads a matrix file: load, warnings, patch names,
// probe facts, expansion.
//
// It must not know patches, images, Kubernetes or how cells run: patch
// names are checked through a function the caller passes, probe facts come
// in as data, and a cell's Kubernetes Job is rendered by the function
// RenderOptions.Job names (launch's).
package matrix
