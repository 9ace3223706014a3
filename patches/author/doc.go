// Package author makes catalog entries of a user's own changes: smpatch
// new (a tree against its pristine source: a checkout's commit, read with
// go-git, or the wheel a site-packages tree was installed from, checked
// against its RECORD hashes), import (a commit or range of a local clone,
// a format-patch or unified diff file, a URL fetched once and pinned by
// its sha256), refresh (the shape a patch has on a newer tree, written as
// a new variant beside the old ones) and the finishing of a conflict by
// hand (a three-way merge against the base file, or markers per hunk, or
// .rej files; journaled, so revert undoes it).
//
// Every diff it writes has the least context that places each change
// once in its file, and is checked by applying it to its own base before
// anything is written; an entry is checked by the catalog's loader before
// it is written, and written inside its directory (os.Root), each file
// atomically. It returns typed errors (*InputError, and the engine's) and
// decides no exit code.
package author
