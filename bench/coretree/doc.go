// Command coretree writes a synthetic sglang checkout for bench/core.bench.sh:
// one of internal/synth's upstream shapes, its target files padded to about
// upstream size (communicator.py ~140 KB, server_args.py ~250 KB).
//
//	go run ./bench/coretree -shape c4-s3 DIR
package main
