// Package termsafe makes text from elsewhere (catalog text, file names,
// logs, JSON values, image contents) safe to print on a terminal: control
// characters (ESC sequences, OSC 52 clipboard writes, NUL, a carriage
// return that overwrites a line) and bytes that are not UTF-8 are shown as
// Go escapes (\x1b, \r, \x00, \u009b, \xff) instead of reaching the
// terminal raw. Line is for one-line fields, Text keeps line breaks, and
// Wrap escapes a whole output stream when it is a terminal.
//
// It must not know where the text comes from or what it means.
package termsafe
