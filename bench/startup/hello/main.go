// Command hello is the floor of bench/startup.bench.sh: a Go program that
// prints one line, built as smpatch is.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stdout, "hello dev")
}
