package author

import (
	"bytes"
	"fmt"
	"mime"
	"regexp"
	"strings"

	"github.com/smpatch/smpatch/patches/udiff"
)

// PatchFile is a .patch or .diff file read: a git format-patch mail (its
// header gives the subject, author and commit) or a plain unified diff.
type PatchFile struct {
	Subject string
	Author  string
	Date    string
	Commit  string // the sha of the "From SHA Mon Sep 17 ..." line
	Files   []*udiff.FileDiff
}

var (
	mboxFrom      = regexp.MustCompile(`^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001$`)
	patchPrefix   = regexp.MustCompile(`^\[[^\]]*PATCH[^\]]*\]\s*`)
	maxHeaderLine = 64 << 10
)

// ParsePatchFile reads data (named src in errors, src:line): the mail
// header when it has one, then the diff (udiff.Parse: paths inside the
// tree, counts that agree). A file of several patches (a format-patch
// series in one mbox) and binary patches are refused with their line.
func ParsePatchFile(src string, data []byte) (*PatchFile, error) {
	pf := &PatchFile{}
	lines := bytes.SplitAfter(data, []byte("\n"))
	froms := 0
	for i, l := range lines {
		s := strings.TrimRight(string(l), "\r\n")
		if m := mboxFrom.FindStringSubmatch(s); m != nil {
			if froms++; froms > 1 {
				return nil, fmt.Errorf("%s:%d: a second patch in one file (a series): import each patch on its own", src, i+1)
			}
			pf.Commit = m[1]
		}
		if s == "GIT binary patch" || strings.HasPrefix(s, "Binary files ") && strings.HasSuffix(s, " differ") {
			return nil, fmt.Errorf("%s:%d: a binary patch: smpatch patches text files only", src, i+1)
		}
	}
	if err := pf.header(src, lines); err != nil {
		return nil, err
	}
	fds, err := udiff.Parse(src, data)
	if err != nil {
		return nil, err
	}
	pf.Files = fds
	return pf, nil
}

// header reads the mail header: the lines before the first blank line,
// when the file starts as a format-patch mail does.
func (pf *PatchFile) header(src string, lines [][]byte) error {
	if len(lines) == 0 || !bytes.HasPrefix(lines[0], []byte("From ")) {
		return nil
	}
	dec := &mime.WordDecoder{}
	key, val := "", ""
	flush := func() {
		if key == "" {
			return
		}
		v, err := dec.DecodeHeader(strings.TrimSpace(val))
		if err != nil {
			v = strings.TrimSpace(val)
		}
		v = strings.Join(strings.Fields(v), " ")
		switch strings.ToLower(key) {
		case "subject":
			pf.Subject = patchPrefix.ReplaceAllString(v, "")
		case "from":
			pf.Author = v
		case "date":
			pf.Date = v
		}
		key, val = "", ""
	}
	for i := 1; i < len(lines); i++ {
		s := strings.TrimRight(string(lines[i]), "\r\n")
		if len(s) > maxHeaderLine {
			return fmt.Errorf("%s:%d: a header line of %d bytes", src, i+1, len(s))
		}
		if s == "" {
			break
		}
		if s[0] == ' ' || s[0] == '\t' {
			val += " " + strings.TrimSpace(s)
			continue
		}
		flush()
		k, v, ok := strings.Cut(s, ":")
		if !ok {
			break // not a mail header after all
		}
		key, val = k, v
	}
	flush()
	return nil
}
