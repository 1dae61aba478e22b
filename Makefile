# Toolbelt — the two commands a newcomer needs are `make run` and `make test`.
GO      ?= go
BIN     ?= bin/toolbelt
export CGO_ENABLED := 1
# gin's MessagePack binding is never used (requests are decoded by
# handlers.bindJSON); leaving it out saves 9 MB of binary.
export GOFLAGS := -tags=nomsgpack

.PHONY: all build run test test-postgres node-deps faults load check generate bench bench-all fmt vet clean screenshots wordvec

all: build

## build: compile the server into bin/toolbelt (cgo, for SQLite)
build:
	$(GO) build -trimpath -ldflags="-s -w" -o $(BIN) .

## run: build and start the server on :8080 with its database under ./data
run: build
	./$(BIN) serve

## test: run every test, with the race detector. A package's tests take at
## most 8 minutes on a quiet 2-core machine; the 20-minute timeout is room
## for a busy one, not a budget. The two longest packages are named first:
## go test starts packages in the order listed, and the suite ends when the
## last one does, so the longest must not start last (./... lists web last).
test: node-deps
	$(GO) test -race -count=1 -timeout 20m ./web . ./...

## test-postgres: run again on Postgres instead of SQLite the tests that build
## stores (those using modelstest or package app: the services over the
## store and the web suite, named first as the longest); the store's own
## tests run on both in `make test`
test-postgres: node-deps
	TOOLBELT_TEST_DATABASE=postgres $(GO) test -race -count=1 -timeout 20m ./web $$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
		awk '$$1 != "toolbelt" && / toolbelt\/(models\/modelstest|app)( |$$)/ {print $$1}')

## node-deps: install the npm validators, clients and agent frameworks the tests drive
## (testdata/node, testdata/frameworks), from their lock files
node-deps:
	@if ! command -v npm >/dev/null; then \
		echo "npm not found: the tests that need testdata/node's packages are skipped (on CI they fail)"; \
	elif [ ! testdata/node/node_modules/.package-lock.json -nt testdata/node/package-lock.json ]; then \
		npm ci --prefix testdata/node --no-audit --no-fund --loglevel=error; \
	fi
	@if command -v npm >/dev/null && [ ! testdata/frameworks/node_modules/.package-lock.json -nt testdata/frameworks/package-lock.json ]; then \
		npm ci --prefix testdata/frameworks --no-audit --no-fund --loglevel=error; \
	fi

## faults: the fault suite alone (Postgres restarted and killed, Redis stopped and restarted, an
## instance killed, the leader frozen, a full disk) against the real binary; prints its figures
faults:
	$(GO) test -run '^TestFaults$$' -count=1 -v .

## load: a minute of steady traffic against the real binary; prints req/s, p50/p95/p99, memory
load:
	$(GO) test -run TestLoad -count=1 -v .

## generate: regenerate the templ components, the OpenAPI document (2.0 and 3.0) and the Go client
generate:
	$(GO) tool templ generate -path views
	$(GO) tool swag init -g main.go -o docs --outputTypes json,yaml --parseInternal --quiet
	$(GO) run ./docs/openapi3 docs/openapi3.json
	$(GO) tool oapi-codegen -config client/oapi-codegen.yaml docs/openapi3.json

## wordvec: remake the built-in embedder's word table (services/embed/wordvec.bin.gz) from the pinned word lists and model
wordvec: node-deps
	$(GO) run ./cmd/wordvecgen

## screenshots: the console guide's pictures (docs/img), taken in Chromium over a test server
screenshots:
	mkdir -p docs/img
	TOOLBELT_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run TestE2EPagesFitNarrowScreens ./web

## check: fail on unformatted code, vet findings or stale generated files (the
## word table included: it is made again from its pinned sources and compared)
check: generate node-deps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	@if [ -n "$$(git status --porcelain -- docs views client)" ]; then \
		echo "generated files are stale; run 'make generate' and commit:"; git status --porcelain -- docs views client; exit 1; fi
	TOOLBELT_CHECK_WORDVEC=1 $(GO) test -count=1 -timeout 20m -run '^TestShippedTable$$' -v ./cmd/wordvecgen

## bench: the ratio benchmarks (cached REST / bare Gin, MCP / REST per protocol
## version, tools/list of 10,000 tools, the federation hop), each side measured
## in one run against its baseline; prints each figure against its target
## (cmd/benchratios). The run's output is kept in bin/bench.txt.
bench: node-deps
	@mkdir -p bin && : > bin/bench.txt
	bash -o pipefail -c "$(GO) test -run '^$$' -bench 'CachedVsBareGin|MCPVsREST' -benchtime 8x -count 3 -timeout 30m ./web | tee -a bin/bench.txt"
	bash -o pipefail -c "$(GO) test -run '^$$' -bench 'MCPToolsList10k' -benchtime 10x -timeout 30m ./web | tee -a bin/bench.txt"
	bash -o pipefail -c "$(GO) test -run '^$$' -bench 'FederationHop' -benchtime 200x -timeout 30m ./web | tee -a bin/bench.txt"
	$(GO) run ./cmd/benchratios < bin/bench.txt

## bench-all: every benchmark of every package, with -benchmem
bench-all:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '_templ.go$$')

clean:
	rm -rf bin
