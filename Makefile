GO      ?= go
BIN     ?= bin/smpatch
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.Version=$(VERSION) -X main.Commit=$(COMMIT)
FUZZTIME ?= 5s

.PHONY: all build install static generate architecture test test-crash test-hostile demo demo-matrix demo-image demo-docker fuzz bench coverage doctor-windows doctor-docs vet clean

all: build

# One static program, bin/smpatch (CGO_ENABLED=0).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/smpatch

# Installs smpatch where `go install` puts binaries: $GOBIN, else
# $(go env GOPATH)/bin; says where, and the PATH line to add when that
# directory is not on PATH.
install:
	@echo "make install: building smpatch (a minute or two with a cold Go cache)"
	CGO_ENABLED=0 $(GO) install -trimpath -ldflags '$(LDFLAGS)' ./cmd/smpatch
	@d="$$($(GO) env GOBIN)"; [ -n "$$d" ] || d="$$($(GO) env GOPATH)/bin"; \
	echo "installed $$d/smpatch"; \
	case ":$$PATH:" in *":$$d:"*) ;; *) echo "$$d is not on PATH: add it, e.g. to ~/.profile:"; echo "  export PATH=\"$$d:\$$PATH\"";; esac

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

# Every test with -race; the last line names what was skipped and why
# (scripts/testsummary reads go test -json).
test: vet
	@bash -o pipefail -c '$(GO) test -race -count=1 -json ./... | $(GO) run ./scripts/testsummary'

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

# The story's fake matrix in real containers (needs a Docker daemon:
# scripts/services.sh up docker).
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
	$(MAKE) doctor-windows

# Where each doctor rule's code conditions hold on real sglang history
# (release tags; main's first parents since 2026-01-01), written to
# doctor/rules/windows.json, and docs/doctor.md from the rules and those
# windows. SGLANG_GIT_DIR holds the tags; SGLANG_MAIN_DIR (default: the
# same clone) holds main, at SGLANG_MAIN_REF (default main).
doctor-windows:
	@if [ -z "$(SGLANG_GIT_DIR)" ]; then echo "make doctor-windows: set SGLANG_GIT_DIR to a clone of sglang with its release tags (and SGLANG_MAIN_DIR=... for one with main)" >&2; exit 2; fi
	$(GO) run ./scripts/doctorwin -sglang "$(SGLANG_GIT_DIR)" -main "$(or $(SGLANG_MAIN_DIR),$(SGLANG_GIT_DIR))" -main-ref "$(or $(SGLANG_MAIN_REF),main)"

# docs/doctor.md again from the rules and the windows as they are (after
# a change to a rule's words; a change to its code conditions needs
# make doctor-windows).
doctor-docs:
	$(GO) run ./scripts/doctorwin -docs

clean:
	rm -rf bin
