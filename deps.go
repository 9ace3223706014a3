//go:build tools

package main

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/gofrs/flock"
	_ "github.com/google/go-containerregistry/pkg/v1/mutate"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/renameio/v2"
	_ "github.com/hashicorp/go-version"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/sergi/go-diff/diffmatchpatch"
	_ "github.com/spf13/cobra"
	_ "k8s.io/api/batch/v1"
	_ "sigs.k8s.io/yaml"
)
