package catalog

import (
	"embed"
	"io/fs"
)

// builtinFS is the built-in catalog: this directory's NAME.toml files and
// the diffs they name (NAME/*.diff), decoded and checked when a command
// loads the catalog, as a catalog directory is.
//
//go:embed *.toml */*.diff
var builtinFS embed.FS

// Builtin is the built-in catalog.
func Builtin() fs.FS { return builtinFS }
