# Yuxi Serverless — developer entry points. `make help` lists them.
SHELL := /usr/bin/env bash
GO ?= go
GOBIN ?= $(shell $(GO) env GOPATH)/bin
PORT ?= 5050
FUNCTIONS := intake dispatcher agent-step tool-invoke doc-parse kb-index kb-graph evaluate
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

.PHONY: sandbox-tools
sandbox-tools: ## Install bubblewrap (the sandbox provisioner's bwrap backend) and python3 for sandboxes when missing
	@missing=""; command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	test -x /usr/bin/python3 || missing="$$missing python3"; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
		echo "sandbox-tools: installing$$missing"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 $$sudo apt-get install -y -qq$$missing >/dev/null; \
	fi

.PHONY: docker-engine
docker-engine: ## Make a Docker Engine answer for the docker sandbox tests (installs docker.io, busybox-static; starts a private dockerd)
	@infra/sandbox-provisioner/backend/docker/dockertest/engine.sh >/dev/null

# Test folders with a package.json + package-lock.json (npm ci installs them).
NPM_DIRS := tests/e2e/openai-npm tests/web/browser

.PHONY: npm-deps
npm-deps: ## Install the npm packages tests use (the official openai client), and Node.js when missing
	@command -v npm >/dev/null 2>&1 || { sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
		echo "npm-deps: installing nodejs and npm"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq nodejs npm >/dev/null; }
	@for d in $(NPM_DIRS); do \
		if [ ! -f $$d/node_modules/.package-lock.json ] || [ $$d/package-lock.json -nt $$d/node_modules/.package-lock.json ]; then \
			(cd $$d && npm ci --silent --no-audit --no-fund) || exit 1; \
		fi; \
	done

.PHONY: mcp-test-deps
mcp-test-deps: ## Install node (apt) and the reference MCP server the MCP tests start (npm ci in tests/mcpeverything)
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
		echo "mcp-test-deps: installing nodejs and npm"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq nodejs npm >/dev/null; }
	@cd tests/mcpeverything && { cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null || \
		{ npm ci --no-audit --no-fund --loglevel=error >/dev/null && cp package-lock.json node_modules/.installed-lock; }; }

# The web UI (web/): rebuilt into web/dist only when a source changed.
WEB_SOURCES := $(shell find web/src -type f 2>/dev/null) web/index.html web/vite.config.ts web/tsconfig.json web/package.json web/package-lock.json

.PHONY: web
web: web/dist/index.html ## Build the web UI into web/dist when its sources changed (npm ci; Node.js from apt when missing)

web/dist/index.html: $(WEB_SOURCES)
	@command -v npm >/dev/null 2>&1 || { sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
		echo "web: installing nodejs and npm"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq nodejs npm >/dev/null; }
	@cd web && { cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null || \
		{ npm ci --no-audit --no-fund --loglevel=error >/dev/null && cp package-lock.json node_modules/.installed-lock; }; }
	cd web && npm run --silent build >/dev/null
	@touch $@

.PHONY: chromium
chromium: ## Install Debian's chromium (the browser test drives it) when missing
	@command -v chromium >/dev/null 2>&1 || { sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
		echo "chromium: installing"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 $$sudo apt-get install -y -qq chromium >/dev/null; }

.PHONY: run
run: services sandbox-tools web ## Run the whole platform in one process on PORT (default 5050)
	PORT=$(PORT) $(GO) run ./infra/local/cmd/yuxi-server

.PHONY: test
# Every package runs under the race detector: the whole suite takes about 7
# minutes with -race on a busy 2-core machine (about 3.5 without), well inside
# the 20-minute budget. Subprocesses the crash and multiprocess tests start are
# built without -race; the packages they run are raced by their own tests.
test: services tools sandbox-tools docker-engine npm-deps mcp-test-deps web chromium ## Run every test with -race against real PostgreSQL and Redis (what CI runs)
	PATH="$(GOBIN):$$PATH" $(GO) test -race -count=1 -timeout 20m ./...

.PHONY: fuzz
FUZZTIME ?= 30s
FUZZ_PKGS := ./functions/intake/intake
fuzz: services ## Run every fuzz target for FUZZTIME each (default 30s; go test -fuzz takes one target per call)
	@set -e; for pkg in $(FUZZ_PKGS); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

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
	$(MAKE) -s bench-web || { s=$$?; [ $$status -ne 0 ] || status=$$s; }; \
	exit $$status

.PHONY: bench-web
bench-web: services web chromium npm-deps ## The web bench: chat screen cold load (bytes, TTI), 200 streamed answers (frame p99 ÷ idle), 1,000-message thread paging
	@out=$$(mktemp); YUXI_WEB_BENCH=1 $(GO) test -count=1 -v -timeout 20m -run '^TestWebBench$$' ./tests/web/ >$$out 2>&1; s=$$?; \
	sed -n 's/^ *\(\[web [0-9]\].*\)/\1/p' $$out; [ $$s -eq 0 ] || cat $$out; rm -f $$out; exit $$s

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

LAMBDA_ARCH ?= arm64
.PHONY: build-lambda
build-lambda: ## Cross-compile every function (functions/*) into bin/lambda/<name>.zip holding a provided.al2023 bootstrap (LAMBDA_ARCH=arm64|amd64)
	@mkdir -p bin/lambda
	@for d in functions/*/; do f=$$(basename $$d); [ -f $$d/main.go ] || continue; \
		mkdir -p bin/lambda/$$f; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) $(GO) build -trimpath -tags lambda.norpc -ldflags='-s -w' -o bin/lambda/$$f/bootstrap ./functions/$$f || exit 1; \
		rm -f bin/lambda/$$f.zip; \
		if command -v zip >/dev/null 2>&1; then (cd bin/lambda/$$f && zip -q -X ../$$f.zip bootstrap); \
		else python3 -c 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1],"w",zipfile.ZIP_DEFLATED); i=zipfile.ZipInfo("bootstrap"); i.external_attr=0o755<<16; z.writestr(i,open(sys.argv[2],"rb").read(),zipfile.ZIP_DEFLATED)' bin/lambda/$$f.zip bin/lambda/$$f/bootstrap; fi || exit 1; \
		echo "bin/lambda/$$f.zip"; done

.PHONY: images
images: ## Build a container image per function and the provisioner's (IMAGE_REPO:<name>; docker import, no base image; IMAGE_ARCH, IMAGE_PUSH=1)
	@infra/images/build.sh

.PHONY: localstack-up
localstack-up: build-lambda ## Start LocalStack with Docker and apply localstack/ init hooks (needs Docker; not available on the CI machines)
	docker compose -f localstack/docker-compose.yml up -d --wait

.PHONY: localstack-down
localstack-down: ## Stop LocalStack
	docker compose -f localstack/docker-compose.yml down -v

.PHONY: build
build: ## Build every function binary, the all-in-one runner (yuxi-server) and the yuxi CLI into bin/
	@mkdir -p bin
	@for f in $(FUNCTIONS); do $(GO) build -o bin/$$f ./functions/$$f || exit 1; done
	$(GO) build -o bin/yuxi-server ./infra/local/cmd/yuxi-server
	$(GO) build -o bin/yuxi ./infra/cli/cmd/yuxi
