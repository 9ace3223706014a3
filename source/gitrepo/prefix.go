package gitrepo

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// hashPrefixer is a store that lists the objects whose hash starts with a
// prefix (go-git's filesystem storage: loose objects and pack indexes).
type hashPrefixer interface {
	HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error)
}

// HashesWithPrefix lists the objects of the store and of every alternate
// object directory whose hash starts with prefix, so that go-git's
// ResolveRevision and HashesWithPrefix below find a short SHA whose object
// lives behind an alternate (git clone --shared, --reference).
func (s *withAlternates) HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	for _, st := range append([]hashPrefixer{s.Storage}, prefixers(s.alts)...) {
		hs, err := st.HashesWithPrefix(prefix)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	return out, nil
}

func prefixers[T hashPrefixer](ss []T) []hashPrefixer {
	out := make([]hashPrefixer, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// HashesWithPrefix lists the objects of repo (its loose objects and pack
// indexes, and those of its alternates when OpenGitStorage opened it)
// whose hex hash starts with hexPrefix (4 to 40 hex digits, an odd count
// too), sorted. A store that cannot list by prefix is an error.
func HashesWithPrefix(repo *git.Repository, hexPrefix string) ([]plumbing.Hash, error) {
	hexPrefix = strings.ToLower(hexPrefix)
	if len(hexPrefix) < 4 || len(hexPrefix) > 40 {
		return nil, fmt.Errorf("%q: a hash prefix has 4 to 40 hex digits", hexPrefix)
	}
	b, err := hex.DecodeString(hexPrefix[:len(hexPrefix)&^1])
	if err != nil {
		return nil, fmt.Errorf("%q: not hex digits", hexPrefix)
	}
	st, ok := repo.Storer.(hashPrefixer)
	if !ok {
		return nil, fmt.Errorf("this repository's store (%T) cannot list objects by prefix", repo.Storer)
	}
	hs, err := st.HashesWithPrefix(b)
	if err != nil {
		return nil, err
	}
	var out []plumbing.Hash
	for _, h := range hs {
		if strings.HasPrefix(h.String(), hexPrefix) {
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
