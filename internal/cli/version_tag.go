package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/runner"
	"github.com/smpatch/smpatch/source"
)

// A checkout whose files name no version (a version.py without a literal,
// say) is read from git: the nearest version tag from HEAD. smpatch does
// not link go-git (its object store alone doubles smpatch's start-up), so
// it asks smpatch-full, which reads git in process, through the hidden
// command VersionTagCmd; only such a checkout pays for the second program.

// VersionTagCmd is the hidden command of smpatch-full that answers
// smpatch's question: `smpatch-full __version-tag DIR` prints one JSON
// object, {"version": ..., "from": ...} or {"error": ...}.
const VersionTagCmd = "__version-tag"

// versionTagAnswer is VersionTagCmd's output.
type versionTagAnswer struct {
	Version string `json:"version,omitempty"`
	From    string `json:"from,omitempty"`
	Error   string `json:"error,omitempty"`
}

// NewVersionTagCmd is VersionTagCmd, answered with read (smpatch-full's
// in-process reader).
func NewVersionTagCmd(read source.TagReader) *cobra.Command {
	return &cobra.Command{
		Use:    VersionTagCmd + " DIR",
		Short:  "The version of the checkout DIR from its nearest git tag, as JSON (for smpatch)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var a versionTagAnswer
			v, from, err := read(c.Context(), args[0])
			if err != nil {
				a.Error = err.Error()
			} else {
				a.Version, a.From = source.VersionString(v), from
			}
			return json.NewEncoder(c.OutOrStdout()).Encode(a)
		},
	}
}

// oncePerDir is read answering once per directory: a command reads a
// tree's version more than once, and HEAD does not move under one command
// (smpatch's reader starts smpatch-full; smpatch-full's walks the history).
// Each run of a program gets a reader of its own.
func oncePerDir(read source.TagReader) source.TagReader {
	var answers sync.Map // absolute directory -> tagAnswer
	return func(ctx context.Context, dir string) (*version.Version, string, error) {
		key := dir
		if abs, err := filepath.Abs(dir); err == nil {
			key = abs
		}
		if a, ok := answers.Load(key); ok {
			a := a.(tagAnswer)
			return a.v, a.from, a.err
		}
		v, from, err := read(ctx, dir)
		if ctx.Err() == nil {
			answers.Store(key, tagAnswer{v, from, err})
		}
		return v, from, err
	}
}

type tagAnswer struct {
	v    *version.Version
	from string
	err  error
}

// askFull runs smpatch-full's VersionTagCmd for dir.
func askFull(ctx context.Context, dir string) (*version.Version, string, error) {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	path, err := FindFull(self)
	if err != nil {
		return nil, "", fmt.Errorf("git tags not read: reading them takes smpatch-full, and %v", err)
	}
	// The hidden command answers in one line; a minute covers the history
	// walk of a large repository.
	res, err := runner.Run(ctx, time.Minute, path, VersionTagCmd, dir)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, "", ctxErr
		}
		msg, _, _ := strings.Cut(strings.TrimSpace(string(res.Stderr)), "\n")
		return nil, "", fmt.Errorf("git tags not read: %s %s %s: %v: %s", path, VersionTagCmd, dir, err, msg)
	}
	var a versionTagAnswer
	if err := json.Unmarshal(res.Stdout, &a); err != nil {
		return nil, "", fmt.Errorf("git tags not read: %s %s: unreadable answer: %v", path, VersionTagCmd, err)
	}
	if a.Error != "" {
		return nil, "", errors.New(a.Error)
	}
	v, err := source.ParseVersion(a.Version)
	if err != nil {
		return nil, "", fmt.Errorf("git tags not read: %s %s: version %q: %v", path, VersionTagCmd, a.Version, err)
	}
	return v, a.From, nil
}
