"""A user's own Java store under ``verify`` (``jvm:CLASS@PATH``): the README's worked example compiled into a
jar with javac and verified (pass), a broken variant failed by the check naming its mistake, a class Java's
verifier rejects reported as the store's error (its JVM verifies the user's classes, as Kafka's store JVMs do
not), and a bad reference a usage error before anything runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _in_memory_store_supplier(name: str, scope: str, doc: str, store: str, extra: str = "") -> str:
    """The Java source of ``com.example.NAME``, a supplier of Kafka's in-memory store opened by ``store`` (a
    Java expression), with ``extra`` members."""
    return f"""package com.example;

import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.internals.InMemoryKeyValueStore;

/** {doc} */
public class {name} implements KeyValueBytesStoreSupplier {{
    private final String name;

    public {name}(String name) {{
        this.name = name;
    }}
{extra}
    public String name() {{
        return name;
    }}

    public KeyValueStore<Bytes, byte[]> get() {{
        return {store};
    }}

    public String metricsScope() {{
        return "{scope}";
    }}
}}
"""


BROKEN = _in_memory_store_supplier("ForgetfulStoreSupplier", "forgetful",
                                   "Kafka's in-memory store whose delete returns the value but keeps it.", """\
new InMemoryKeyValueStore(name) {
            @Override
            public synchronized byte[] delete(Bytes key) {
                return get(key);
            }
        }""")

# Kafka's in-memory store, its supplier's class file made unverifiable after javac (MARKER's ``return null``
# turned into returning an int): a JVM that verifies the user's classes refuses to load it.
UNVERIFIABLE = _in_memory_store_supplier("UnverifiableStoreSupplier", "unverifiable",
                                         "Kafka's in-memory store; its class file is made unverifiable.",
                                         "new InMemoryKeyValueStore(name)", """
    static Object marker() {
        int unused = 0;
        return null;
    }
""")
MARKER, UNVERIFIABLE_MARKER = bytes.fromhex("033b01b0"), bytes.fromhex("033b1ab0")  # iconst_0 istore_0 aconst_null|iload_0 areturn


def _readme_example() -> str:
    blocks = re.findall(r"^```java\n(.*?)^```", README.read_text(), re.S | re.M)
    [example] = [b for b in blocks if "class MyStoreSupplier" in b]
    return example


@pytest.fixture(scope="module")
def jar(tmp_path_factory) -> Path:
    """The README's example and the broken variant compiled with javac (against Kafka Streams 4.4.0's jars,
    the classpath the README prints) into one jar."""
    if shutil.which("javac") is None:
        pytest.fail("javac is not on PATH: the jvm tier needs a JDK 17")
    root = tmp_path_factory.mktemp("java-store")
    sources = root / "com" / "example"
    sources.mkdir(parents=True)
    (sources / "MyStoreSupplier.java").write_text(_readme_example())
    (sources / "ForgetfulStoreSupplier.java").write_text(BROKEN)
    (sources / "UnverifiableStoreSupplier.java").write_text(UNVERIFIABLE)
    classpath = subprocess.run([sys.executable, "-m", "eos_harness.kafka_streams.user", "--classpath"],
                               capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["javac", "-nowarn", "-d", str(root / "classes"), "-cp", classpath,
                    *map(str, sources.glob("*.java"))], check=True, cwd=root)
    unverifiable = root / "classes" / "com" / "example" / "UnverifiableStoreSupplier.class"
    code = unverifiable.read_bytes()
    assert code.count(MARKER) == 1
    unverifiable.write_bytes(code.replace(MARKER, UNVERIFIABLE_MARKER))
    subprocess.run(["jar", "cf", str(root / "my-store.jar"), "-C", str(root / "classes"), "."], check=True)
    return root / "my-store.jar"


@pytest.mark.jvm
def test_the_readmes_java_store_passes_verify_from_its_jar(cli, jar, tmp_path):
    out = tmp_path / "my-store.json"
    done = cli("verify", f"jvm:com.example.MyStoreSupplier@{jar}", "--seed", "1", "--examples", "3", "--steps", "10",
               "--json", out, timeout=300)
    verdict = json.loads(out.read_text())
    assert done.returncode == 0, (done.stdout, verdict["violations"])
    assert verdict["verdict"] == "pass"
    exercised = verdict["coverage"]["exercised"] if "coverage" in verdict else {}
    assert exercised.get("read_committed_isolation"), verdict.get("coverage")  # Kafka's readOnly(READ_COMMITTED)


@pytest.mark.jvm
def test_a_broken_java_store_fails_verify_by_the_check_naming_its_mistake(cli, jar, tmp_path):
    out = tmp_path / "forgetful.json"
    done = cli("verify", f"jvm:com.example.ForgetfulStoreSupplier@{jar}", "--seed", "1", "--examples", "5",
               "--steps", "12", "--max-findings", "1", "--no-shrink", "--json", out, timeout=300)
    verdict = json.loads(out.read_text())
    assert done.returncode == 1, done.stdout
    assert {v["check"] for v in verdict["violations"]} == {"read_your_own_writes"}, verdict["violations"]


@pytest.mark.jvm
def test_a_java_store_whose_class_javas_verifier_rejects_is_reported_not_run(cli, jar, tmp_path):
    out = tmp_path / "unverifiable.json"
    done = cli("verify", f"jvm:com.example.UnverifiableStoreSupplier@{jar}", "--seed", "1", "--examples", "1",
               "--steps", "5", "--max-findings", "1", "--no-shrink", "--json", out, timeout=300)
    assert done.returncode == 1, done.stdout
    assert "verdict: fail" in done.stdout
    assert "java.lang.VerifyError: Bad type on operand stack" in done.stdout


@pytest.mark.parametrize("ref, says", [
    ("jvm:com.example.MyStoreSupplier", "jvm:CLASS@PATH"),
    ("jvm:com.example.MyStoreSupplier@/nonexistent/my-store.jar", "no jar or folder"),
    ("jvm:not a class@.", "is not a Java class name"),
    ("jvm:com.example.Missing@.", "holds no class com.example.Missing"),
])
def test_a_bad_java_store_reference_is_a_usage_error_before_anything_runs(cli, ref, says):
    done = cli.invoke("verify", ref, "--seed", "1")
    assert done.returncode == 2, done.stdout
    assert says in done.stdout + done.stderr
