// Package tomlfile is the one way smpatch reads a TOML file: bounded before
// it is parsed (size and nesting depth), decoded with BurntSushi/toml, and
// every error turned into one line that starts with file:line; Lines finds
// the line a key is defined on. It knows nothing of what the files mean:
// the catalog, matrix, rules and signature loaders own their schemas and
// call it.
package tomlfile
