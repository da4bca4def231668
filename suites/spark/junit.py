"""The Spark suite's results as JUnit (see :mod:`eos_harness.junit`): a testsuite per pipeline
configuration (pipeline, sink, state provider, checkpoint format, source), a testcase per check of
:data:`~eos_harness.suites.spark.checks.CHECKS`, plus ``completed`` and, for the mutant sink,
``caught``. Violations count as the verdict counts them (``strict_only`` duplicates only under
``--strict``); a configuration Spark refuses is skipped (``not_applicable``)."""

from __future__ import annotations

from eos_harness.junit import FAILED, SKIPPED, Case, Scenario, Suite, check_cases, completed_case
from eos_harness.suites.spark.checks import CHECKS, USER_STATE_CHECK
from eos_harness.suites.spark.plan import counted_violations, judge
from eos_harness.verdict import ERROR, FAIL, NOT_APPLICABLE

__all__ = ["campaign_suites", "configuration_name", "spark_suites"]


def configuration_name(result: dict) -> str:
    """``count/file/rocksdb+changelog/fmt2`` (``… (kafka source)`` for a Kafka source)."""
    conf = result["configuration"]
    state = conf["state_provider"] + ("+changelog" if conf["changelog_checkpointing"] else "")
    source = "" if conf.get("source", "file") == "file" else f" ({conf['source']} source)"
    return f"{result['pipeline']}/{result['sink']}/{state}/fmt{conf['checkpoint_format']}{source}"


def spark_suites(results: list[dict], strict: bool, cut_short: bool = False, label: str = "scenario") -> list[Suite]:
    """Spark results (a campaign's, or one ``run``'s) as testsuites, one per configuration. A result
    with ``expected: caught`` (the mutant sink in a campaign) fails as an expected failure; one not
    caught fails its testcase ``caught`` (unless the campaign was ``cut_short``)."""
    groups: dict[str, list[dict]] = {}
    for result in results:
        groups.setdefault(configuration_name(result), []).append(result)
    suites = []
    for name, rows in groups.items():
        classname = f"spark.{name}"
        ran = [r for r in rows if r["verdict"] != NOT_APPLICABLE]
        properties = {"scenarios": len(rows), "not_applicable": len(rows) - len(ran)}
        if not ran:
            suites.append(Suite(name, [Case(NOT_APPLICABLE, classname, SKIPPED,
                                            f"not applicable: {rows[0].get('reason', '')}")], properties))
            continue
        scenarios = [Scenario(f"{label} {r.get('index', '')}".strip(), r["repro"], counted_violations(r, strict),
                              r.get("error") if r["verdict"] == ERROR else None) for r in ran]
        expected_fail = any(r.get("expected") == "caught" for r in ran)
        # a user's query is judged against its crash-free run: its state against the crash-free run's, not a model's
        user = all("reference" in r for r in ran)
        checks = {**{k: v for k, v in CHECKS.items() if k != "state_matches_model"},
                  "state_matches_crash_free": USER_STATE_CHECK} if user else CHECKS
        coverage = None
        statuses = [str(r.get("checks", {}).get("state_matches_crash_free", "")) for r in ran]
        if user and not any(s.startswith(("pass", "fail")) for s in statuses):
            coverage = {"not_exercised": {"state_matches_crash_free": next((s for s in statuses if s), "not read")}}
        cases = check_cases(classname, checks, scenarios, len(ran), expected_to_fail=expected_fail, coverage=coverage)
        cases.append(completed_case(classname, scenarios, len(ran)))
        if expected_fail:
            if any(judge(r, strict) == FAIL for r in ran):
                cases.append(Case("caught", classname))
            elif cut_short or all(r["verdict"] == ERROR for r in ran):
                cases.append(Case("caught", classname, SKIPPED, "not caught before the campaign stopped; not judged"))
            else:
                cases.append(Case("caught", classname, FAILED, f"the mutant sink passed {len(ran)} scenario(s): no "
                                  f"check caught it (a hole in the harness); replay: {ran[0]['repro']}"))
        suites.append(Suite(name, cases, properties))
    return suites


def campaign_suites(campaign: dict) -> list[Suite]:
    """A chaos campaign (its JSON object) as testsuites, one per configuration (:func:`spark_suites`)."""
    return spark_suites(campaign["scenarios"], bool(campaign.get("strict")),
                        cut_short=campaign.get("stopped") is not None)
