// Package words spells counts in the lines smpatch prints: "1 cell",
// "2 cells". It owns nothing else.
package words

import "strconv"

// Plural is one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count is n and the word that goes with it: "1 cell", "2 cells".
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + Plural(n, one, many)
}
