# Conduit's two commands: `make run` and `make test`. Each installs what is missing first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# One cargo target folder outside the clone, shared by every checkout on this machine.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/conduit-target
export CARGO_TERM_COLOR ?= $(if $(CI),never,auto)
CARGO := cargo
# The desktop end-to-end tests (the real app in a real window).
DESKTOP_TESTS := desktop desktop_chat desktop_chat_window desktop_settings desktop_webview desktop_secrets desktop_approval desktop_images desktop_elicit desktop_sampling desktop_builtin desktop_oauth desktop_toolset desktop_export desktop_mentions desktop_app_views desktop_quit
# The version every crate shares (the package's version).
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)
# Where `make package` leaves the .deb.
DEB := $(CURDIR)/dist/conduit_$(VERSION)_amd64.deb
XVFB := xvfb-run --auto-servernum --server-args="-screen 0 1400x900x24"

.PHONY: help setup setup-test ui run test fmt-check clippy test-ui build test-rust test-desktop conformance bench clean \
	release setup-package package package-test package-install-test bench-release bench-footprint bench-soak

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

setup: ## Install what `make run` needs and is missing
	scripts/setup.sh run

setup-test: ## Install what `make test` needs and is missing
	scripts/setup.sh test

ui: ui/dist/index.html ## Build the web UI into ui/dist (the app embeds it)

# Built again only when a source changed: a new ui/dist makes Tauri's build script embed
# it again, which recompiles the debug app and relinks the release one (minutes). The
# folders are listed too, so a file added or removed counts as a change.
UI_SOURCES := $(shell find ui/src -print 2>/dev/null) $(wildcard ui/public ui/index.html \
	ui/package.json ui/package-lock.json ui/vite.config.ts ui/svelte.config.js ui/tsconfig*.json)
ui/dist/index.html: $(UI_SOURCES)
	cd ui && npm run build --silent
	touch $@

run: setup build ## Build and start the desktop app
	"$(CARGO_TARGET_DIR)/debug/conduit-desktop"

test: setup-test ## Every check and test: formatting, lints, Rust, UI, the desktop app under Xvfb, the .deb
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory fmt-check test-ui ui clippy build test-rust package-test; \
	echo "make test: all passed in $$(( $$(date +%s) - start )) s"

fmt-check:
	$(CARGO) fmt --all -- --check

test-ui: ## UI type check and unit tests
	cd ui && npm run check --silent && npm test --silent

# Twice: with the tests (their dev-dependencies turn the test fixtures on), and as the
# binaries ship (without them), so code only one of the two builds uses is caught too.
clippy: ui
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	$(CARGO) clippy --locked --workspace -- -D warnings

build: ui
	$(CARGO) build --locked --workspace --all-targets

# Every package is selected in each cargo call so that features unify the same way and
# nothing is compiled twice. The desktop test needs a display, so all tests run under Xvfb.
test-rust: build ## The workspace's Rust tests, the desktop end-to-end tests included
	rm -rf test-artifacts/desktop*
	$(XVFB) $(CARGO) test --locked --workspace
	@echo "desktop screenshots: $(CURDIR)/test-artifacts/desktop"

test-desktop: build ## Only the desktop end-to-end tests, under Xvfb
	rm -rf test-artifacts/desktop*
	$(XVFB) $(CARGO) test --locked --workspace $(addprefix --test ,$(DESKTOP_TESTS))

conformance: setup-test build ## The MCP conformance suite against `conduit mcp serve --http` (2025-11-25, 2026-07-28; also part of test-rust)
	$(CARGO) test --locked --workspace --test mcp_serve conformance -- --nocapture

clean: ## Remove build outputs (the shared cargo target folder included)
	rm -rf ui/dist test-artifacts dist "$(CARGO_TARGET_DIR)"

bench: setup-test build ## Benchmarks: streaming, history, media, MCP (release); the chat window (real webview); footprint beside a bare Tauri window; a 1,000-turn soak
	$(CARGO) bench --locked -p conduit-providers --bench stream
	$(CARGO) bench --locked -p conduit-store --bench history
	$(MAKE) --no-print-directory bench-release
	$(CARGO) bench --locked -p conduit-mcp --bench mcp
	$(XVFB) $(CARGO) test --locked --workspace --test desktop_bench -- --ignored --nocapture
	$(MAKE) --no-print-directory bench-footprint bench-soak

# The release binaries the desktop benchmarks measure, built from the tree as it is (a
# benchmark run alone must not measure an older build).
bench-release: ui
	$(CARGO) build --locked --workspace --release --bin conduit --bin conduit-desktop --bin bare-window --bin bare-window-page

bench-footprint: setup-test bench-release ## Start time, idle memory and CPU and binary sizes beside a bare Tauri window; the CLI with MCP servers over HTTP (release builds)
	$(XVFB) $(CARGO) test --locked --workspace --test desktop_footprint -- --ignored --nocapture

bench-soak: setup-test bench-release ## 1,000 turns with a tool image each in one window: memory every 100 turns (release build)
	$(XVFB) $(CARGO) test --locked --workspace --test desktop_soak -- --ignored --nocapture

release: setup ui ## Release build of the app and the CLI (what the package ships)
	$(CARGO) build --locked --workspace --release --bin conduit --bin conduit-desktop

setup-package: setup
	packaging/setup.sh

# The Tauri CLI looks for the app crate where it finds tauri.conf.json: TAURI_APP_PATH points
# it at src-tauri (whose tauri.conf.json links to the top-level one); the .deb's own
# settings (icons relative to src-tauri, depends, the CLI beside the app) are merged from
# packaging/tauri.deb.json. `bundle` packs the release build above; it builds nothing.
package: setup-package release ## Build dist/conduit_<version>_amd64.deb (the app, the `conduit` CLI, icon, desktop entry)
	rm -rf "$(CARGO_TARGET_DIR)/release/bundle/deb"
	TAURI_APP_PATH="$(CURDIR)/src-tauri" TAURI_FRONTEND_PATH="$(CURDIR)/ui" node packaging/tauri.cjs \
	  bundle --ci --no-sign --bundles deb --config packaging/tauri.deb.json \
	  --config '{"bundle":{"linux":{"deb":{"files":{"/usr/bin/conduit":"$(CARGO_TARGET_DIR)/release/conduit"}}}}}'
	mkdir -p dist
	cp "$(CARGO_TARGET_DIR)/release/bundle/deb/Conduit_$(VERSION)_amd64.deb" "$(DEB)"
	@echo "package: $(DEB)"

package-test: setup-test package ## Unpack the .deb, check its files, control data and desktop entry, start the unpacked app under Xvfb
	CONDUIT_DEB="$(DEB)" $(XVFB) $(CARGO) test --locked --workspace --test package_deb -- --ignored --nocapture

package-install-test: package ## Install the .deb with apt-get on this machine, run it, remove it (needs root or sudo)
	packaging/install-test.sh "$(DEB)"
