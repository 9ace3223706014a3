// Package doctor finds, before a model loads, every known obstacle a
// launch of sglang meets on this host: it reads the host (a probe
// report), the sglang tree and what is installed beside it, the model's
// config.json and the launch's flags as that tree's server_args.py parses
// them, turns them into facts, and decides each rule of rules/ on them.
// A rule (rules/ID.toml) is data: its conditions (facts and code markers
// in the tree), what happens, its remedies and sources; the evaluator
// knows only the kinds of condition. Findings carry their evidence (a
// file:line of the tree, a report field, the launch); what could not be
// read is reported as unknown, never guessed. The windows of sglang
// releases and main commits each rule applies to are measured on real
// history (rules/windows.json, written by scripts/doctorwin) and
// docs/doctor.md is generated from the rules and those windows.
//
// It must not know the command line, exit codes or how a report reaches
// a terminal beyond the text and JSON it writes; it never imports or
// runs sglang, torch or flashinfer.
package doctor
