// Command catwalk times upstream.Range, the walk behind `smpatch check
// --range` and make coverage, over a range of real sglang history with a
// chosen set of patches: the built-in catalog's patch -one alone, the whole
// catalog in one walk, one walk per patch, or N copies of one patch (each
// parsed from its own file, as N distinct patches of that shape) in one
// walk. bench/coverage.real.sh runs it side by side.
package main
