# Yuxi Serverless — developer entry points. `make help` lists them.
SHELL := /usr/bin/env bash
GO ?= go
GOBIN ?= $(shell $(GO) env GOPATH)/bin
PORT ?= 5050
FUNCTIONS := intake dispatcher agent-step tool-invoke doc-parse kb-index
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: services
services: ## Start PostgreSQL and Redis when installed but not running
	@infra/local/services.sh

.PHONY: tools
tools: ## Install test tools (the AWS Lambda Runtime Interface Emulator)
	@command -v aws-lambda-rie >/dev/null 2>&1 || test -x $(GOBIN)/aws-lambda-rie || \
		$(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

.PHONY: mcp-test-deps
mcp-test-deps: ## Install node (apt) and the reference MCP server the MCP tests start (npm ci in tests/mcpeverything)
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
		echo "mcp-test-deps: installing nodejs and npm"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq nodejs npm >/dev/null; }
	@cd tests/mcpeverything && { cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null || \
		{ npm ci --no-audit --no-fund --loglevel=error >/dev/null && cp package-lock.json node_modules/.installed-lock; }; }

.PHONY: run
run: services ## Run the whole platform in one process on PORT (default 5050)
	PORT=$(PORT) $(GO) run ./infra/local/cmd/yuxi

.PHONY: test
# Every package runs under the race detector: the whole suite takes about 7
# minutes with -race on a busy 2-core machine (about 3.5 without), well inside
# the 20-minute budget. Subprocesses the crash and multiprocess tests start are
# built without -race; the packages they run are raced by their own tests.
test: services tools mcp-test-deps ## Run every test with -race against real PostgreSQL and Redis (what CI runs)
	PATH="$(GOBIN):$$PATH" $(GO) test -race -count=1 -timeout 20m ./...

.PHONY: bench-tools
bench-tools: ## Install the floors make bench measures against (pdftotext from poppler-utils, psql)
	@missing=""; command -v pdftotext >/dev/null 2>&1 || missing="$$missing poppler-utils"; \
	command -v psql >/dev/null 2>&1 || missing="$$missing postgresql-client"; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
		echo "bench-tools: installing$$missing"; \
		{ $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq$$missing >/dev/null; } || \
			echo "bench-tools: could not install$$missing; make bench reports those figures without a ratio"; \
	fi

.PHONY: bench
bench: services bench-tools mcp-test-deps ## Measure the figures of tests/bench/README.md as ratios vs floors (1–7, then the peers, 8–9)
	@status=0; $(GO) run ./tests/bench || status=$$?; \
	(cd tests/bench/peers && $(GO) run .) || { s=$$?; [ $$status -ne 0 ] || status=$$s; }; \
	exit $$status

.PHONY: bench-peers
bench-peers: services ## Only figures 8–9: our step vs DBOS Transact, our queue vs River (module tests/bench/peers)
	cd tests/bench/peers && $(GO) run .

SOAK ?= 10m
.PHONY: soak
soak: services ## Soak the platform for $(SOAK) at 20 runs/s with 200 SSE clients; print growth per 1,000 runs (SOAK=90s for a short check)
	$(GO) run ./tests/bench -soak $(SOAK)

.PHONY: lint
lint: ## go vet, gofmt, go mod tidy, and the architecture rules (function isolation, events imports, package docs vs imports)
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null 2>&1 || { echo "go.mod/go.sum are not tidy (run go mod tidy):"; $(GO) mod tidy -diff; exit 1; }
	cd tests/bench/peers && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) test -count=1 ./tests/manifests/

.PHONY: build
build: ## Build every function binary and the all-in-one runner into bin/
	@mkdir -p bin
	@for f in $(FUNCTIONS); do $(GO) build -o bin/$$f ./functions/$$f || exit 1; done
	$(GO) build -o bin/yuxi ./infra/local/cmd/yuxi
