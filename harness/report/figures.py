"""The report's plots and timelines, drawn with plotly from a :class:`~eos_harness.report.load.RunView`.

Each function returns an HTML fragment (a ``div`` and the script that draws it) without plotly.js;
the page inlines plotly.js once (:func:`plotly_js`), so the file works offline.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from eos_harness.report.load import RunView, ScenarioView
from plotly.offline import get_plotlyjs

__all__ = ["campaign_rate", "kill_to_first_batch", "plotly_js", "recovery_vs_state", "timeline"]

CATEGORY_STYLE = {  # category → (colour, marker symbol)
    "operation": ("#9aa5b1", "circle"),
    "commit": ("#2b8a3e", "square"),
    "file written": ("#0ca678", "square-open"),
    "crash": ("#c92a2a", "x-thin-open"),
    "recovery": ("#1971c2", "diamond"),
    "fault": ("#e8590c", "star"),
    "lifecycle": ("#495057", "triangle-right"),
    "output": ("#7048e8", "hexagon"),
    "other": ("#adb5bd", "circle-open"),
}
_CONFIG = {"displaylogo": False, "responsive": True}


def plotly_js() -> str:
    """plotly.js itself, to inline once in the page."""
    return get_plotlyjs()


def _html(fig: go.Figure, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=_CONFIG)


def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 380) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, height=height, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 50, "b": 50}, legend={"orientation": "h", "y": -0.2})
    return fig


def timeline(scenario: ScenarioView, div_id: str) -> str:
    """The scenario's history on a time axis, one lane per task instance (or Spark run), each kind of
    event its own marker, and the violations as red crosses on the events where they show."""
    events = scenario.events or []
    lanes = sorted({e.lane for e in events}, key=lambda lane: (lane in ("driver", "harness"), lane))
    fig = go.Figure()
    for category, (colour, symbol) in CATEGORY_STYLE.items():
        chosen = [e for e in events if e.category == category]
        if not chosen:
            continue
        big = category in ("crash", "recovery", "fault")
        fig.add_trace(go.Scatter(
            x=[e.time for e in chosen], y=[e.lane for e in chosen], mode="markers", name=category,
            marker={"color": colour, "symbol": symbol, "size": 13 if big else 8,
                    "line": {"width": 2 if big else 0.5, "color": colour}},
            hovertext=[e.text for e in chosen], hoverinfo="text"))
    by_seq = {e.seq: e for e in events}
    marked = [(v, by_seq[v["event"]]) for v in scenario.violations if isinstance(v.get("event"), int)
              and v["event"] in by_seq]
    if marked:
        fig.add_trace(go.Scatter(
            x=[e.time for _, e in marked], y=[e.lane for _, e in marked], mode="markers", name="violation",
            marker={"color": "#e03131", "symbol": "x", "size": 18, "line": {"width": 1, "color": "#000"}},
            hovertext=[f"VIOLATION {v['check']}: key={v.get('key')} expected={str(v.get('expected'))[:120]} "
                       f"observed={str(v.get('observed'))[:120]} (event #{e.seq}: {e.type})" for v, e in marked],
            hoverinfo="text"))
        for time in sorted({e.time for _, e in marked})[:20]:
            fig.add_vline(x=time, line={"color": "#e03131", "dash": "dot", "width": 1})
    axis = "seconds since the scenario started" if scenario.timed else "history event (seq: the order of events)"
    _layout(fig, f"{scenario.name}: {scenario.subject}", axis, "", height=170 + 45 * max(len(lanes), 1))
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes)))
    return _html(fig, div_id)


def recovery_vs_state(view: RunView, div_id: str) -> str | None:
    """Lifecycle: each recovery's time against the changelog records it replayed, per store."""
    fig = go.Figure()
    points = 0
    for store in sorted({s.subject for s in view.scenarios}):
        xs, ys, texts = [], [], []
        for s in view.scenarios:
            if s.subject != store:
                continue
            for rec in s.recovery:
                if not isinstance(rec.get("seconds"), int | float):
                    continue
                xs.append(rec.get("replayed_records", 0))
                ys.append(rec["seconds"] * 1000)
                texts.append(f"{s.name}, instance {rec.get('instance')}: replayed {rec.get('replayed_records')} of "
                             f"{rec.get('changelog_length')} records, wiped: {rec.get('wiped')}, "
                             f"{rec['seconds'] * 1000:.1f} ms")
        if xs:
            points += len(xs)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=store, hovertext=texts, hoverinfo="text",
                                     marker={"size": 7, "opacity": 0.75}))
    if not points:
        return None
    _layout(fig, f"Recovery time against state size ({points} recoveries)", "changelog records replayed",
            "recovery time (ms)")
    return _html(fig, div_id)


def campaign_rate(view: RunView, div_id: str) -> str | None:
    """Scenarios finished per second over the campaign (from each scenario's ``started_at`` and ``seconds``)."""
    ends = [s.started_at + s.seconds for s in view.scenarios
            if isinstance(s.started_at, int | float) and isinstance(s.seconds, int | float)]
    if len(ends) < 2:
        return None
    start = min(s.started_at for s in view.scenarios if isinstance(s.started_at, int | float))
    span = max(ends) - start
    width = max(1.0, math.ceil(span / 30))  # about 30 buckets
    buckets = [0] * (int(span // width) + 1)
    for end in ends:
        buckets[int((end - start) // width)] += 1
    xs = [i * width for i in range(len(buckets))]
    fig = go.Figure(go.Bar(x=xs, y=[n / width for n in buckets], width=[width] * len(xs), offset=0,
                           name="scenarios/s", marker={"color": "#1971c2"},
                           hovertext=[f"{n} scenario(s) finished in [{x:.0f} s, {x + width:.0f} s)"
                                      for x, n in zip(xs, buckets, strict=True)], hoverinfo="text"))
    _layout(fig, f"Scenarios per second over the campaign ({len(ends)} scenarios in {span:.1f} s)",
            "seconds since the campaign started", "scenarios finished per second")
    return _html(fig, div_id)


def kill_to_first_batch(view: RunView, div_id: str) -> str | None:
    """Spark: seconds from each driver kill to the first batch the restarted run committed, per configuration."""
    fig = go.Figure()
    points = 0
    for subject in sorted({s.subject for s in view.scenarios}):
        times = [(t, s) for s in view.scenarios if s.subject == subject for t in s.kill_to_first_batch]
        if times:
            points += len(times)
            fig.add_trace(go.Scatter(x=[subject] * len(times), y=[t for t, _ in times], name=subject,
                                     mode="markers", marker={"size": 11, "opacity": 0.8},
                                     hovertext=[f"{s.name} ({', '.join(s.schedule)}): {t:.1f} s" for t, s in times],
                                     hoverinfo="text"))
    if not points:
        return None
    _layout(fig, f"Kill to first committed batch after the restart ({points} kills)", "configuration",
            "seconds", height=420)
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(showlegend=False)
    return _html(fig, div_id)
