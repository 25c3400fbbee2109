# podpatch — see README.md. `make demo` runs the main job, `make test` runs every test.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
FUZZTIME ?= 5s

.PHONY: all build demo test vet fmt-check unit fuzz bench clean

all: build

build: bin/podpatch

bin/podpatch: $(shell find cmd policies -name '*.go' -not -name '*_test.go') go.mod go.sum
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/podpatch

## demo: render the example policies onto the cluster managers' objects and show what changed.
demo: bin/podpatch
	@hack/demo.sh bin/podpatch

## test: vet, formatting, unit and golden tests, CLI tests against the built binary, brief fuzzing.
test: vet fmt-check unit fuzz

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -count=1 ./...

fuzz:
	@for t in $$($(GO) test -list '^Fuzz' ./policies | grep '^Fuzz'); do \
		echo "fuzz $$t ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./policies || exit 1; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./policies

clean:
	rm -rf bin
