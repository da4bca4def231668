# Two entry points that do all their own setup: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pyproject.toml states the ranges the harness works with; the exact versions installed come from
# CONSTRAINTS (constraints.txt; `make test-lowest` uses constraints-lowest.txt, the lower bounds).
CONSTRAINTS ?= constraints.txt
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(CONSTRAINTS) | cksum | cut -d' ' -f1)
RUN_DIR ?= runs/demo
# The edit loop's tier: no Kafka, no Spark, no JVM (jvm: Kafka Streams' own stores), none of the opt-in tiers, nothing `heavy` (conftest.py).
CHECK_MARKERS := not slow and not docker and not browser and not install and not kafka and not spark and not heavy and not jvm

.PHONY: demo test check bytecode spark-archive test-spark-full test-spark-cluster test-kafka-3.9 test-kafka-streams test-lowest test-beside setup jars lint bench clean docker-image test-docker test-browser

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e '.[all,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# Pinned Kafka (and Spark-Kafka) jars from Maven Central into the git-ignored .cache/ (once).
jars: $(STAMP)
	$(BIN)/python -m eos_harness.jars

# The Spark driver's class archive (.cache/spark-cds/, once): one short pipeline run that ends on its
# own (each Spark run starts a new driver JVM, in half the time from it). The tests make it themselves
# before their first Spark test, on one worker while the other runs tests without Spark (conftest.py).
spark-archive: $(STAMP)
	$(BIN)/python -m eos_harness.suites.spark.warmup

demo: $(STAMP)
	$(BIN)/eos-harness demo --out $(RUN_DIR)

# The project's own modules compiled to bytecode (__pycache__, git-ignored; only what changed since): an editable
# install leaves them uncompiled, and where PYTHONDONTWRITEBYTECODE is set (CI images) every Python process the
# tests start (each command, store zygote, Spark driver and worker) compiled them again: about 0.1 CPU-s each.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q harness models faults suites tests

# What CI runs: everything but the opt-in tiers (slow, docker, browser, install); the 25 slowest last.
# On WORKERS pytest-xdist workers, each test file on one worker (--dist loadfile: a file's module
# fixtures, a Spark matrix or a Kafka cluster, start once); WORKERS=0 runs them in this process.
# Four on 2 cores: much of a test is waiting (for a broker, a JVM, a timeout to pass). Clean-clone runs of
# .ci/run at one commit, nothing else running, the cores' idle share sampled every 10 s: on three workers
# 10.6% idle, pytest 11 min 54 s and 12 min 11 s; on four 3.7% idle, 11 min 0 s and 12 min 11 s (the
# machine's own speed varies by that much from run to run: every file was slower in the second). After the
# Spark drivers' lighter starts, four fresh clones on four workers: pytest 10 min 27 s to 10 min 55 s.
WORKERS ?= 4
test: $(STAMP) jars bytecode
	$(BIN)/python -m pytest -q --durations=25 -n $(WORKERS) --dist loadfile

# The edit loop (no jars, no JVM): under 3 minutes on 2 cores, on the WORKERS workers of `make test`.
check: $(STAMP) bytecode
	$(BIN)/python -m pytest -q -m '$(CHECK_MARKERS)' --durations=10 -n $(WORKERS) --dist loadfile

# Opt-in: every Spark test but the standalone cluster's (make test-spark-cluster), with the `slow` ones `make test` leaves out (the Spark behaviours
# the full matrix found: suites/spark/test_spark.py's FINDINGS).
test-spark-full: $(STAMP) jars
	$(BIN)/python -m pytest -q -m 'spark and not spark_cluster' --durations=15 -n $(WORKERS) --dist loadfile

# Opt-in: campaigns on a real Spark standalone cluster (a master and two workers started on 127.0.0.1 from the
# installed PySpark): the same verdicts as the local pool, and a worker's JVM SIGKILLed mid-campaign.
test-spark-cluster: $(STAMP)
	$(BIN)/python -m pytest -q -m spark_cluster --durations=5 tests/test_spark_engine.py tests/test_check_at_scale.py

# Opt-in: the Kafka tier (every `kafka` test `make test` runs) on Kafka 3.9.1 brokers instead of 4.4.0:
# EOS_KAFKA_VERSION=3.9.1 is the one option that picks the brokers' version (CLI, pytest, kafka-metadata).
test-kafka-3.9: $(STAMP) jars
	EOS_KAFKA_VERSION=3.9.1 $(BIN)/python -m pytest -q -m 'kafka and not slow' --durations=15 -n $(WORKERS) --dist loadfile

# Opt-in: every test of the kafka-streams suite, the `slow` ones `make test` leaves out included (each mutant of
# Streams' restoration caught by its check; every configuration of the application killed and restarted).
test-kafka-streams: $(STAMP) jars
	$(BIN)/python -m pytest -q -m 'kafka' --durations=10 suites/kafka_streams

# Opt-in: the harness installed with the lowest version of every dependency (constraints-lowest.txt,
# the lower bounds of pyproject.toml's ranges) in a new virtual environment, running `make check`'s tests.
test-lowest:
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(MAKE) --no-print-directory check VENV="$$tmp/venv" CONSTRAINTS=constraints-lowest.txt

# Opt-in (network): `pip install 'eos-harness[kafka]' quixstreams==3.28.1` resolves and both work.
test-beside: $(STAMP)
	$(BIN)/python -m pytest -m install tests/test_install.py

lint: $(STAMP)
	$(BIN)/ruff check .

# Opt-in Docker path (root; needs `apt-get install -y docker.io debootstrap`): the offline Kafka image and the
# nightly runner image (docker/nightly: a Spark master and two workers, three Kafka brokers, the campaigns).
docker-image: $(STAMP) jars
	$(BIN)/python -m eos_harness.cluster.docker build --runner --start-dockerd

test-docker: $(STAMP) jars
	$(BIN)/python -m pytest -m docker tests/test_docker_kafka.py tests/test_docker_nightly.py

# Opt-in browser tier (root, for apt-get): the HTML report rendered in Debian's headless chromium.
test-browser: $(STAMP)
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	$(BIN)/python -m pytest -m browser tests/test_report_browser.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
