// Package junit is the one JUnit XML schema smpatch writes (check's
// --format junit, matrix run's junit.xml): test suites of test cases that
// pass, fail, err or are skipped, with the counts CI systems read.
//
// It knows nothing of patches or cells: callers fill the cases.
package junit
