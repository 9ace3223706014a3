// Command imagebench is the helper behind bench/image.bench.sh.
//
//	imagebench gen -dir DIR -bytes N [-layers K] [-shape c5-s5] [-shell BUSYBOX]
//	imagebench measure CMD [ARGS...]
//	imagebench save -layout DIR -tag REPO:TAG -out FILE
//	imagebench dockerfiles -refs REFS -base DIR -from REPO:TAG -ctx DIR
//	docker inspect IMAGE | imagebench same REFS CELL
//	imagebench extract -layout DIR
//
// gen writes a synthetic base image: an OCI layout with random,
// incompressible layers (streamed to disk, never held in memory) under an
// installed sglang in one of the upstream shapes the built-in sm120-fusion
// patch meets; -shell adds a top layer with a static busybox as /bin/sh, so
// that a Dockerfile on the base can RUN. measure runs a command and prints
// its wall time in seconds and its peak resident set size in MiB
// ("1.234 56.7"), with the command's own output sent to stderr.
//
// The rest build the alternative, `docker build`, from what smpatch built.
// save writes a layout's one image as a docker-save tarball (for docker
// load). dockerfiles reads each cell a matrix build's refs file names and
// writes a build context DIR/CELL: rootfs/ with the regular files of the
// layer smpatch put on the base, a Dockerfile FROM the base that copies
// them, removes with RUN rm the paths that layer whites out, and sets the
// ENV and LABELs the cell's config adds to the base's, and a list of the
// removed paths (whiteouts). same checks that `docker inspect` of a built
// image shows the cell's env and labels. extract flattens a layout's image
// with go-containerregistry's mutate.Extract, reading every entry: what a
// build would cost if it flattened the base each time instead of keeping
// an index.
package main
