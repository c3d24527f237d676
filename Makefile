# The README's quick start: `make run` (registry on SQLite) and `make test` (the whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8080
export CRASHREG_DATABASE_URL ?= sqlite:///$(CURDIR)/crashreg.db

.PHONY: run test setup postgres lint bench reporter lab lab-fixtures lab-debian demo-cores

$(BIN)/crashreg: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(BIN)/crashreg

## run: set up, migrate, make the quickstart admin token once, serve on http://127.0.0.1:$(PORT) (gunicorn,
## as in production: gunicorn.conf.py), its links (pages, bundles, Jira) at CRASHREG_PUBLIC_URL, by default
## that same address
run: setup
	$(BIN)/crashreg db upgrade
	@token=$$($(BIN)/crashreg tokens create --name quickstart --scope admin --if-missing) || exit 1; \
	if [ -n "$$token" ]; then \
		echo "The quickstart admin token, shown this once. Paste this line into the shell you report from:"; \
		echo; echo "    export TOKEN=$$token"; echo; \
	fi; \
	echo "The registry's URL, for the examples in README.md and the demo (paste it too):"; \
	echo; echo "    export CRASHREG_PUBLIC_URL=$${CRASHREG_PUBLIC_URL:-http://127.0.0.1:$(PORT)}"; echo; \
	echo "Pages: $${CRASHREG_PUBLIC_URL:-http://127.0.0.1:$(PORT)}/login (log in with a token; more: $(BIN)/crashreg tokens create --help)"
	CRASHREG_BIND=127.0.0.1:$(PORT) CRASHREG_PUBLIC_URL=$${CRASHREG_PUBLIC_URL:-http://127.0.0.1:$(PORT)} \
		exec $(BIN)/gunicorn --config gunicorn.conf.py registry.wsgi:app

## test: set up, start what the tests need, lint, run the whole suite on SQLite and PostgreSQL
## (--no-loadscope-reorder: the workers take files in collection order, the long ones first as
## tests/conftest.py sorts them; xdist would otherwise order files by their count of tests,
## which puts the lab's and the other long files, with few tests each, at the end). Bytecode
## is compiled once first: where PYTHONDONTWRITEBYTECODE is set (this machine's environment)
## every process the tests start (`crashreg` runs, gunicorn, agents) would compile the
## sources again, 0.4 s of a `crashreg` start's 3 s of CPU.
test:
	@bash scripts/test-needs.sh
	@$(MAKE) --no-print-directory setup
	@bash scripts/test-services.sh
	$(BIN)/ruff check .
	$(BIN)/python -m compileall -q -j 0 registry sync dashboards agents migrations testkit tests
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

## reporter: build the stdlib-only reporter zipapp (agents/build_reporter.py) for the hosts
REPORTER_PYZ := dist/crashreg-report.pyz
reporter: $(REPORTER_PYZ)

$(REPORTER_PYZ): agents/build_reporter.py agents/crashreg_report.py registry/__init__.py $(shell find registry/fingerprint agents/reporter agents/kernellog agents/coredump agents/dpu -type f -not -path '*/__pycache__/*')
	$(PYTHON) -m agents.build_reporter --output $@

## demo-cores: crash the demo's program for real, keep its cores and the stacks read from them (registry/demo/cores/README.md)
demo-cores: setup
	$(BIN)/python -m scripts.demo_cores

## lab: the crash lab alone (real kernels crash in QEMU and report; docs/crash-lab.md)
LAB_OUT ?= /tmp/crashreg-lab-out
lab: setup
	@bash scripts/test-services.sh
	CRASHREG_LAB_OUT=$(LAB_OUT) $(BIN)/pytest -q -n 0 tests/lab $(PYTEST_ARGS)

## lab-fixtures: crash every kind twice and keep the real logs in tests/support/data/golden/lab/
lab-fixtures: setup
	CRASHREG_LAB_OUT=$(LAB_OUT) $(BIN)/pytest -q -n 0 tests/lab/test_kinds.py -k "not in_the_repository"
	mkdir -p tests/support/data/golden/lab
	cp $(LAB_OUT)/kinds/fixtures/*.log tests/support/data/golden/lab/

## lab-debian: Debian 12 with kdump-tools (debootstrap, cached), set up as agents/README.md says, crashed
lab-debian: setup
	@bash scripts/test-services.sh
	CRASHREG_LAB_OUT=$(LAB_OUT) $(BIN)/pytest -q -n 0 tests/lab/debian_install.py $(PYTEST_ARGS)
