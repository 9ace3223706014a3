package gitrepo

import (
	"github.com/go-git/go-git/v5"
)

// Open opens the git repository holding dir (dir itself, or the nearest
// parent with a .git directory or file; linked work trees included) as a
// go-git Repository, reading objects borrowed through absolute
// objects/info/alternates too: OpenGitStorage's store under go-git's
// full repository API.
func Open(dir string) (*git.Repository, error) {
	st, wt, err := OpenGitStorage(dir)
	if err != nil {
		return nil, err
	}
	return git.Open(st, wt)
}
