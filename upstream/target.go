package upstream

import (
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// Target is one upstream revision to check: PROJECT[=URL]@REF.
type Target struct {
	Project source.Project
	URL     string // the project's default URL when not given
	Ref     string
}

func (t Target) String() string { return string(t.Project) + "@" + t.Ref }

// ParseTarget parses PROJECT[=URL]@REF. The URL may itself contain '@'
// (git@host:path): the last '@' separates the revision.
func ParseTarget(s string) (Target, error) {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return Target{}, fmt.Errorf("%q: want PROJECT[=URL]@REF (for example sglang@main)", s)
	}
	head, ref := s[:at], s[at+1:]
	if ref == "" {
		return Target{}, fmt.Errorf("%q: empty revision after '@'", s)
	}
	name, url, hasURL := strings.Cut(head, "=")
	p, err := gitrepo.ParseProject(name)
	if err != nil {
		return Target{}, fmt.Errorf("%q: %w", s, err)
	}
	if hasURL && url == "" {
		return Target{}, fmt.Errorf("%q: empty URL after '='", s)
	}
	if !hasURL {
		url = gitrepo.DefaultURL(p)
	}
	return Target{Project: p, URL: url, Ref: ref}, nil
}
