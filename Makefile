# Two entry points that do all their own setup: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
RUN_DIR ?= runs/demo

.PHONY: demo test setup jars lint bench clean docker-image test-docker test-browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# Pinned Kafka (and Spark-Kafka) jars from Maven Central into the git-ignored .cache/ (once).
jars: $(STAMP)
	$(BIN)/python -m eos_harness.jars

demo: $(STAMP)
	$(BIN)/eos-harness demo --out $(RUN_DIR)

test: $(STAMP) jars
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

# Opt-in Docker path (root; needs `apt-get install -y docker.io debootstrap`): the offline Kafka image.
docker-image: $(STAMP) jars
	$(BIN)/python -m eos_harness.cluster.docker build --start-dockerd

test-docker: $(STAMP) jars
	$(BIN)/python -m pytest -m docker tests/test_docker_kafka.py

# Opt-in browser tier (root, for apt-get): the HTML report rendered in Debian's headless chromium.
test-browser: $(STAMP)
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	$(BIN)/python -m pytest -m browser tests/test_report_browser.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
