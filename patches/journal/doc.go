// Package journal is the record smpatch keeps in a tree of what it changed
// there (.smpatch/): the state of every applied patch, signed with the
// user's key, and copies of the bytes before and after (and of the
// bytecode apply removed, which revert puts back); the lock that keeps
// two commands apart; the transactions that write a tree's files under it
// (Apply, Revert), so that a process stopped or killed at any moment leaves
// every file original or patched as the journal says; the recovery that
// finishes what a killed command left (Recover), and the report of it for
// commands that only read (Interrupted); adopting a journal written
// elsewhere (Trust) and dropping an entry (Forget). docs/security.md says
// which of its checks stops which threat.
//
// It knows entries, files and bytes (and what a patch's name may be, by
// the catalog's rule): not catalogs, plans, diffs or the command line.
// What to write is the engine's (package patches).
package journal
