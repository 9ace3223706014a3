GO      ?= go
BIN     ?= bin/smpatch
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.Version=$(VERSION) -X main.Commit=$(COMMIT)
FUZZTIME ?= 5s

.PHONY: all build install static generate architecture test test-crash test-hostile demo demo-matrix demo-image demo-docker fuzz bench coverage vet clean

all: build

# One static program, bin/smpatch (CGO_ENABLED=0).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/smpatch

# Installs smpatch where `go install` puts binaries: $GOBIN, else
# $GOPATH/bin (usually ~/go/bin; put it on PATH).
install:
	CGO_ENABLED=0 $(GO) install -trimpath -ldflags '$(LDFLAGS)' ./cmd/smpatch
	@d="$$($(GO) env GOBIN)"; [ -n "$$d" ] || d="$$($(GO) env GOPATH)/bin"; echo "installed $$d/smpatch"

# Static binaries to carry to a GPU host: linux/amd64 and linux/arm64 (GH200, GB200, DGX Spark).
static:
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/smpatch-linux-amd64 ./cmd/smpatch
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/smpatch-linux-arm64 ./cmd/smpatch

vet:
	$(GO) vet ./...

# Rewrites the generated files: internal/synth's copies of the shape
# fixtures (testdata/shapes/). A test fails while they are stale.
generate:
	$(GO) generate ./internal/testkit/synth

# docs/architecture.md from `go list`: the packages, their layers and the
# direction of their imports (a test fails while it is stale).
architecture:
	$(GO) run ./scripts/archdoc > docs/architecture.md.tmp && mv docs/architecture.md.tmp docs/architecture.md || { rm -f docs/architecture.md.tmp; exit 1; }

test: vet
	$(GO) test -race -count=1 ./...

# The crash-safety loop at full length: a real subprocess killed with SIGKILL
# at random moments, at least 200 rounds.
test-crash:
	SMPATCH_CRASH_ROUNDS=200 $(GO) test -race -count=1 -run 'Crash' -v ./patches/... ./cmd/...

# The corpus of hostile inputs (testdata/hostile/AREA/CASE/), replayed: each
# case's commands, exit codes, messages, and nothing else on disk changed.
test-hostile:
	$(GO) test -race -count=1 -run 'TestHostileCorpus' -v ./cmd/smpatch/

demo: build
	./examples/demo.sh $(BIN)

demo-matrix: build
	./examples/demo-matrix.sh $(BIN)

# Images on a machine without a registry or a Docker daemon.
demo-image: build
	./examples/demo-image.sh $(BIN)

# The story's fake matrix in real containers (needs: scripts/services.sh up).
demo-docker: build
	./examples/demo-docker.sh $(BIN)

# Runs every fuzz target briefly (FUZZTIME each).
fuzz:
	./bench/fuzz.sh $(FUZZTIME)

bench: build
	./bench/run.sh $(BIN)

# From the real histories of sglang and flashinfer: the compatibility table
# (upstream/compat/compat.json, embedded in smpatch, and docs/compatibility.md;
# scripts/compat.sh), then where each catalog patch applies on sglang's
# release tags and first-parent main, beside what the table says of each
# tag's pinned flashinfer (docs/coverage.md; scripts/coverage.sh). Needs
# clones: SGLANG_GIT_DIR (release tags) and FLASHINFER_GIT_DIR; SGLANG_MAIN_DIR
# when sglang's main is in another clone (COVERAGE_BRANCH names it there).
# SGLANG_GIT_DIR=~/src/sglang FLASHINFER_GIT_DIR=~/src/flashinfer make coverage
coverage:
	@if [ -z "$(SGLANG_GIT_DIR)" ] || [ -z "$(FLASHINFER_GIT_DIR)" ]; then echo "make coverage: set SGLANG_GIT_DIR and FLASHINFER_GIT_DIR to clones of sglang and flashinfer with their release tags, e.g. SGLANG_GIT_DIR=~/src/sglang FLASHINFER_GIT_DIR=~/src/flashinfer make coverage" >&2; exit 2; fi
	GO="$(GO)" SGLANG_GIT_DIR="$(SGLANG_GIT_DIR)" FLASHINFER_GIT_DIR="$(FLASHINFER_GIT_DIR)" ./scripts/compat.sh
	$(MAKE) build
	SGLANG_GIT_DIR="$(SGLANG_GIT_DIR)" ./scripts/coverage.sh $(BIN) > docs/coverage.md.tmp && mv docs/coverage.md.tmp docs/coverage.md || { rm -f docs/coverage.md.tmp; exit 1; }

clean:
	rm -rf bin
