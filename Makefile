GO      ?= go
BIN     ?= bin/smpatch
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 5s

.PHONY: all build install static test test-crash test-hostile demo demo-matrix demo-image demo-docker fuzz bench vet clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/smpatch

# Installs smpatch where `go install` puts binaries: $GOBIN, else $GOPATH/bin
# (usually ~/go/bin; put it on PATH).
install:
	CGO_ENABLED=0 $(GO) install -trimpath -ldflags '$(LDFLAGS)' ./cmd/smpatch
	@echo "installed $$($(GO) env GOBIN || true)$$( [ -n "$$($(GO) env GOBIN)" ] || echo "$$($(GO) env GOPATH)/bin")/smpatch"

# A static linux/amd64 binary to carry to a GPU host.
static:
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/smpatch-linux-amd64 ./cmd/smpatch

vet:
	$(GO) vet ./...

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

clean:
	rm -rf bin
