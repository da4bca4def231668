"""``eos-harness new-store``: the scaffold a store implementer starts from. Filled in with a few lines
per method around a dict (persisted as one JSON file, replaced atomically on commit), it passes
``verify``, and the pytest file it generated runs the suite on it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

# What an implementer writes in place of each `raise NotImplementedError("fill in demo_store.OWNER.METHOD")`.
FILLED = {
    "CommittedView.get": "return self.store.committed.get(key)",
    "CommittedView.range": "return merged_range(self.store.committed, {}, lo, hi)",
    "CommittedView.all": "return merged_range(self.store.committed, {})",
    "DemoStore.init": """
        self.file = Path(context.directory) / "state.json"
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.via_processor = context.via_processor
        self.recover(None)""",
    "DemoStore.persistent": "return True",
    "DemoStore.transactional": "return True",
    "DemoStore.manages_offsets": "return True",
    "DemoStore.get": "return self.pending[key] if key in self.pending else self.committed.get(key)",
    "DemoStore.put": "self.pending[key] = value",
    "DemoStore.put_all": """
        for key, value in entries:
            self.put(key, value)""",
    "DemoStore.delete": """
        old = self.get(key)
        self.pending[key] = None
        return old""",
    "DemoStore.range": "return merged_range(self.committed, self.pending, lo, hi)",
    "DemoStore.all": "return merged_range(self.committed, self.pending)",
    "DemoStore.commit": """
        if self.via_processor:
            raise CommitFromProcessorError("a processor must not commit its store")
        data = dict(merged_range(self.committed, self.pending))
        offsets = {**self.offsets, **{str(tp): offset for tp, offset in changelog_offsets.items()}}
        crash_point(BEFORE_WRITE)
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"data": {k.hex(): v.hex() for k, v in data.items()}, "offsets": offsets}))
        os.replace(tmp, self.file)
        crash_point(AFTER_WRITE)
        self.committed, self.offsets, self.pending = data, offsets, {}""",
    "DemoStore.committed_offset": "return self.offsets.get(str(tp))",
    "DemoStore.recover": """
        doc = json.loads(self.file.read_text()) if self.file.exists() else {"data": {}, "offsets": {}}
        self.committed = {bytes.fromhex(k): bytes.fromhex(v) for k, v in doc["data"].items()}
        self.offsets, self.pending = doc["offsets"], {}
        return True""",
    "DemoStore.read_committed": "return CommittedView(self)",
    "DemoStore.flush": "pass",
    "DemoStore.close": "self.pending = {}",
}
IMPORTS = ("import json\nimport os\nfrom pathlib import Path\n\nfrom eos_harness.faults.points import crash_point\n"
           "from eos_harness.store import CommitFromProcessorError\n")
PLACEHOLDER = re.compile(r'^( *)raise NotImplementedError\("fill in demo_store\.(\w+\.\w+)"\)$', re.M)


def fill(source: str) -> str:
    """The generated module with every placeholder replaced by its lines (each must be there)."""
    seen = []

    def body(match: re.Match) -> str:
        indent, where = match.groups()
        seen.append(where)
        return textwrap.indent(textwrap.dedent(FILLED[where]).strip("\n"), indent)

    filled = PLACEHOLDER.sub(body, source)
    assert sorted(seen) == sorted(FILLED), set(seen) ^ set(FILLED)
    return filled.replace("from collections.abc import", IMPORTS + "from collections.abc import", 1)


def test_new_store_filled_around_a_dict_passes_verify_and_its_pytest_file_runs_it(cli, tmp_path):
    made = cli("new-store", "demo_store", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert made.returncode == 0, made.stdout + made.stderr
    adapter, test_file = tmp_path / "demo_store.py", tmp_path / "test_demo_store.py"
    source = adapter.read_text()
    # Every method of the protocol, with its contract, and the committed-view class.
    assert "class CommittedView" in source and "class DemoStore" in source
    assert "Transactional stores apply data and offsets atomically" in source
    assert "merged_range" in source and "with_crash_points" in source
    assert "several_changelog_partitions=False" in source  # how a task's store says so
    adapter.write_text(fill(source))

    verified = cli("verify", "demo_store:make_store", "--seed", "5", "--examples", "10", "--json", "v.json",
                   cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    result = json.loads((tmp_path / "v.json").read_text())
    assert result["verdict"] == "pass"
    assert {p["name"] for p in result["points"]} == {"demo_store.commit.before_write", "demo_store.commit.after_write"}

    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file.name],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout


def test_new_store_never_overwrites_and_refuses_a_name_that_is_not_an_identifier(cli, tmp_path):
    (tmp_path / "test_mine.py").write_text("# the user's own\n")
    refused = cli("new-store", "mine", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert refused.returncode == 2 and "never overwrites" in refused.stderr
    assert (tmp_path / "test_mine.py").read_text() == "# the user's own\n" and not (tmp_path / "mine.py").exists()
    bad = cli("new-store", "my-store", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert bad.returncode == 2 and "not a Python identifier" in bad.stderr and "my_store" in bad.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "test_mine.py"]


def test_new_store_refuses_a_name_that_shadows_an_importable_module_and_says_which(cli, tmp_path):
    (tmp_path / "their_pkg").mkdir()
    (tmp_path / "their_pkg" / "__init__.py").write_text("")
    for name, why in [("eos_harness", "eos-harness's own package"), ("os", "the standard library's module 'os'"),
                      ("click", "a module importable here"), ("their_pkg", str(tmp_path / "their_pkg"))]:
        refused = cli("new-store", name, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert why in refused.stderr and f"{name}_store" in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["their_pkg"]


def test_new_store_in_a_read_only_directory_is_a_usage_error_that_writes_nothing(cli, tmp_path):
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    # As root, permission bits do not stop a write: the immutable attribute does.
    lock = ["chattr", "+i"] if os.geteuid() == 0 else ["chmod", "555"]
    subprocess.run([*lock, str(read_only)], check=True)
    try:
        refused = cli("new-store", "demo_store", "--dir", read_only, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    finally:
        subprocess.run(["chattr", "-i", str(read_only)] if os.geteuid() == 0 else ["chmod", "755", str(read_only)],
                       check=True)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"cannot write in {read_only}" in refused.stderr and "Traceback" not in refused.stderr
    assert list(read_only.iterdir()) == []
