package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/tomlfile"
	"github.com/smpatch/smpatch/launch"
)

// The config file holds the defaults people repeat:
// $XDG_CONFIG_HOME/smpatch/config.toml (~/.config/smpatch/config.toml
// when XDG_CONFIG_HOME is unset). Precedence: flag > environment >
// config file > built-in default.

// config is the file's keys; anything else is an error with file:line.
type config struct {
	Python     string   `toml:"python"`      // --python ($SMPATCH_PYTHON)
	Catalog    []string `toml:"catalog"`     // --catalog ($SMPATCH_CATALOG); relative to the file's directory
	Color      string   `toml:"color"`       // --color
	Runner     string   `toml:"runner"`      // matrix run --runner
	ResultsDir string   `toml:"results_dir"` // matrix run: --out defaults to RESULTS_DIR/NAME

	file string
}

// configPath is where the config file is looked for.
func configPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "smpatch", "config.toml")
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig(path string) (*config, error) {
	cfg := &config{file: path}
	if path == "" {
		return cfg, nil
	}
	data, err := tomlfile.ReadFile(nil, path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return nil, err
	}
	md, err := tomlfile.Decode(path, data, cfg)
	if err != nil {
		return nil, err
	}
	lineOf := tomlfile.IndexLines(data).Line
	if err := tomlfile.UnknownError(path, md, nil, lineOf); err != nil {
		return nil, err
	}
	at := func(key string) int { return lineOf(toml.Key{key}) }
	if cfg.Color != "" {
		if err := checkColorFlag(cfg.Color); err != nil {
			return nil, tomlfile.Errorf(path, at("color"), "color = %q: want auto, always or never", cfg.Color)
		}
	}
	if cfg.Runner != "" {
		if _, err := launch.ParseRunnerKind(cfg.Runner); err != nil {
			return nil, tomlfile.Errorf(path, at("runner"), "%v", err)
		}
	}
	for i, d := range cfg.Catalog {
		cfg.Catalog[i] = configPathValue(path, d)
	}
	if cfg.ResultsDir != "" {
		cfg.ResultsDir = configPathValue(path, cfg.ResultsDir)
	}
	if cfg.Python != "" && strings.ContainsRune(cfg.Python, os.PathSeparator) {
		cfg.Python = configPathValue(path, cfg.Python)
	}
	return cfg, nil
}

// configPathValue expands ~/ and makes a relative path relative to the
// config file's directory.
func configPathValue(file, p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(file), p)
}

// applyConfig settles the global defaults: a flag given wins, then the
// environment ($SMPATCH_PYTHON; $SMPATCH_CATALOG is added to --catalog as
// before), then the config file.
func (g *Globals) applyConfig(c *cobra.Command) error {
	cfg, err := loadConfig(configPath())
	if err != nil {
		return err
	}
	g.config = cfg
	flags := c.Flags()
	if !flags.Changed("python") {
		if p := os.Getenv("SMPATCH_PYTHON"); p != "" {
			g.Python = p
		} else {
			g.defaultPython = cfg.Python
		}
	}
	if !flags.Changed("color") && cfg.Color != "" {
		g.Color = cfg.Color
	}
	return nil
}

// DefaultRunner is matrix run's runner when --runner is not given.
func (g *Globals) DefaultRunner() launch.RunnerKind {
	if g.config != nil && g.config.Runner != "" {
		return launch.RunnerKind(g.config.Runner) // checked when read
	}
	return launch.RunnerLocal
}

// ResultsDir is the directory matrix run's results go under by default.
func (g *Globals) ResultsDir() string {
	if g.config != nil && g.config.ResultsDir != "" {
		return g.config.ResultsDir
	}
	return "results"
}
