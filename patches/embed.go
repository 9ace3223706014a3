package patches

import (
	"embed"
	"io/fs"
)

// builtinFS holds the built-in catalog, patches/catalog/ (NAME.toml plus
// NAME/*.diff). "all:" keeps the directory embeddable while it holds only
// its .keep file.
//
//go:embed all:catalog
var builtinFS embed.FS

// builtinCatalog is the built-in catalog rooted at the catalog directory.
func builtinCatalog() fs.FS {
	sub, err := fs.Sub(builtinFS, "catalog")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}
