// Package shell writes text into the bash scripts smpatch leaves for
// people and schedulers to run (run.sh, slurm.sbatch, a Slurm array
// script): Quote makes one word of any string, Comment makes text safe on
// a "# ..." line, and Check refuses what no word can carry.
//
// Quote emits one form only: the word as it is when it is made of a few
// plain ASCII characters, else plain single quotes, an embedded quote
// closing them, escaped with a backslash and opening them again:
//
//	it's  ->  'it'\''s'
//
// Inside single quotes bash gives no byte a meaning but the
// closing quote, and 0x27 is never part of a multi-byte character in any
// locale glibc ships (UTF-8, BIG5, BIG5-HKSCS, GBK, GB18030, SHIFT_JIS,
// EUC-*): so the word reads back byte for byte in every locale, bytes that
// are not UTF-8 included. bash's $'...' form is never written: its
// backslash escapes are read after the locale has paired bytes, and in
// BIG5 a lead byte pairs with the backslash of \' and ends the quote early.
//
// It must not know what the scripts are for or where the text comes from.
package shell
