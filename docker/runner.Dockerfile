# The nightly runner (docker/nightly): one image that is the Spark master, a Spark worker (its executors'
# Python is the same) and the campaign driver of `eos-harness chaos --engine spark`, built offline.
#
# BASE is a local image imported from a Debian rootfs made by debootstrap with Java 17 and Python 3.11
# (openjdk-17-jre-headless, python3, python3-venv, procps): nothing is pulled. The build context
# (assembled by `python -m eos_harness.cluster.docker build --runner`) holds this file, constraints.txt and
# wheels/: the harness of the checkout and everything it needs with [spark,kafka], built by pip on the host at
# the versions of constraints.txt. The build runs without a network (pip --no-index).
ARG BASE
FROM ${BASE} AS install
ARG EXTRAS
# the build removes this stage's image once the runner is built (by this label)
LABEL eos-harness.build-stage="runner-install"
COPY constraints.txt /tmp/constraints.txt
COPY wheels/ /tmp/wheels/
RUN set -eux; \
    python3 -m venv /opt/eos; \
    /opt/eos/bin/pip install --no-index --no-cache-dir --find-links /tmp/wheels --constraint /tmp/constraints.txt \
        "eos-harness[${EXTRAS}]"; \
    /opt/eos/bin/python -c "import pyspark, eos_harness; print('pyspark', pyspark.__version__)"

FROM ${BASE}
LABEL org.opencontainers.image.title="eos-harness/runner" \
      org.opencontainers.image.description="eos-harness with PySpark on Java 17: Spark master, worker and campaign driver, built offline"
COPY --from=install /opt/eos /opt/eos
ENV LANG=C.UTF-8 \
    PATH=/opt/eos/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYSPARK_PYTHON=/opt/eos/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/eos/bin/python \
    SPARK_HOME=/opt/eos/lib/python3.11/site-packages/pyspark \
    EOS_HARNESS_CACHE=/var/cache/eos-harness
RUN set -eux; java -version; eos-harness --help >/dev/null; mkdir -p /var/cache/eos-harness /run-dir
WORKDIR /run-dir
CMD ["eos-harness", "--help"]
