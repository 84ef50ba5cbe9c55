"""The operations bundle (deploy/grafana, deploy/prometheus) stays true to /metrics: every
metric a panel or an alert names is one clawgate serves, under the name Prometheus scrapes (a
Counter `x` is `x_total`, a Histogram `x_bucket`, `x_sum`, `x_count`), with the labels it has;
the dashboard imports into Grafana; every alert is complete and its runbook anchor exists; and,
with promtool, the rules load and fire on the events they are about."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

import bot.server  # noqa: F401 - /metrics serves the default registry of everything it imports
from tests.unit.test_docs import anchors

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "clawgate-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus" / "clawgate-alerts.yml"
OPERATIONS = ROOT / "docs" / "operations.md"

# The series prometheus_client exposes for a family of each type.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "unknown": ("",),
}
TARGET_LABELS = frozenset({"instance", "job"})  # added by Prometheus to every scraped series
KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool"})
KEYWORDS |= {"and", "or", "unless", "offset", "inf", "nan"}
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
NAME = re.compile(r"(?<![\w.$])([a-zA-Z_:][\w:]*)(\s*\{[^}]*\})?")
LABEL = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")
TEMPLATE = re.compile(r"\$__\w+|\$\{\w+\}|\$\w+")  # Grafana's variables


def served() -> dict[str, frozenset[str]]:
    """Every series name /metrics can serve (each suffix its family's type gives it), with
    its label names, whether or not a labelled metric has a child yet."""
    names: dict[str, frozenset[str]] = {}
    # The registry's only list of its collectors (private, but stable for years).
    collectors: set[Collector] = set(REGISTRY._names_to_collectors.values())
    for collector in collectors:
        # A metric knows its label names before it has any child (`_labelnames`: there is no
        # public accessor); the process and platform collectors say theirs in their samples.
        if isinstance(collector, MetricWrapperBase):
            declared, families = frozenset(collector._labelnames), collector.describe()
        else:
            declared, families = frozenset(), list(collector.collect())
        for family in families:
            labels = declared | {label for s in family.samples for label in s.labels}
            for suffix in SUFFIXES[family.type]:
                names[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return names


def selectors(expr: str) -> Iterator[tuple[str, set[str]]]:
    """Each metric a PromQL expression selects, with the labels its matchers name: not
    functions or aggregations (followed by a parenthesis), keywords, the labels of grouping
    clauses, ranges, numbers or strings."""
    text = TEMPLATE.sub("", STRING.sub('""', expr))
    text = GROUPING.sub(" ", re.sub(r"\[[^\]]*\]", "", text))
    for match in NAME.finditer(text):
        name, matchers = match[1], match[2]
        if matchers is None and re.match(r"\s*\(", text[match.end() :]):
            continue
        if name.lower() in KEYWORDS:
            continue
        yield name, set(LABEL.findall(matchers or ""))


def grouped_by(expr: str) -> set[str]:
    return {label.strip() for group in GROUPING.findall(expr) for label in group.split(",")} - {""}


def problems(expr: str, shown: set[str], where: str) -> list[str]:
    """What in `expr` /metrics does not serve: a metric, a label a matcher or a grouping
    names, or a label `shown` (a legend, an annotation) that the result cannot carry."""
    exposed = served()
    found = list(selectors(expr))
    wrong = [f"{where}: no metric named {name}" for name, _ in found if name not in exposed]
    if not found:
        wrong.append(f"{where}: names no metric: {expr}")
    available = set(TARGET_LABELS)
    for name, labels in found:
        available |= exposed.get(name, frozenset())
        wrong += [
            f"{where}: {name} has no label {label}" for label in labels - exposed.get(name, set())
        ]
    wrong += [f"{where}: no metric has label {label}" for label in grouped_by(expr) - available]
    wrong += [f"{where}: shows label {label}, not in the result" for label in shown - available]
    return wrong


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> Iterator[tuple[str, str, set[str]]]:
    """(where, expr, labels its legend shows) of every panel's target."""
    for panel in panels():
        for target in panel["targets"]:
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"], legend


def rules() -> Iterator[dict[str, Any]]:
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        yield from group["rules"]


def test_the_expression_reader_finds_the_metrics_as_prometheus_would() -> None:
    expr = (
        "histogram_quantile(0.95, sum by (le, provider) (rate("
        'clawgate_llm_seconds_bucket{provider!="x"}[$__rate_interval]))) '
        "/ on (instance) group_left max(up offset 5m) > 1e3 and "
        'sum without (job) (increase(clawgate_runs_total{stop_reason=~"error|final"}[1h] @ 0))'
    )
    assert sorted(selectors(expr), key=lambda s: s[0]) == [
        ("clawgate_llm_seconds_bucket", {"provider"}),
        ("clawgate_runs_total", {"stop_reason"}),
        ("up", set()),
    ]
    assert grouped_by(expr) == {"le", "provider", "instance", "job"}


def test_a_query_naming_what_is_not_served_is_caught() -> None:
    """The mistakes this file exists for: the bare name of a counter or a histogram (the
    scraped series carry a suffix), a typo, a label the metric lacks."""
    assert problems("sum(rate(clawgate_runs_total[5m]))", set(), "ok") == []
    assert problems("rate(clawgate_runs[5m])", set(), "q") == ["q: no metric named clawgate_runs"]
    assert problems("clawgate_queue_lag_seconds", set(), "q") == [
        "q: no metric named clawgate_queue_lag_seconds"
    ]
    assert problems('clawgate_approvals_total{status="x"}', set(), "q") == [
        "q: clawgate_approvals_total has no label status"
    ]
    assert problems("sum by (tool) (clawgate_runs_total)", {"model"}, "q") == [
        "q: no metric has label tool",
        "q: shows label model, not in the result",
    ]


def test_every_panel_queries_metrics_clawgate_serves() -> None:
    wrong = [p for where, expr, legend in queries() for p in problems(expr, legend, where)]
    assert wrong == []


def test_every_alert_reads_metrics_clawgate_serves() -> None:
    wrong = []
    for rule in rules():
        text = " ".join(rule.get("annotations", {}).values())
        shown = set(re.findall(r"\$labels\.(\w+)", text))
        wrong += problems(rule["expr"], shown, f"alert {rule.get('alert')}")
    assert wrong == []


def test_the_dashboard_imports_into_grafana_with_a_datasource_to_choose() -> None:
    board = dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 39
    (variable,) = board["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
    for panel in panels():
        assert panel["type"] in {"timeseries", "stat"} and panel["targets"], panel["title"]
        for thing in [panel, *panel["targets"]]:
            assert thing["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_every_alert_is_complete_and_its_runbook_exists() -> None:
    headings = anchors(OPERATIONS)
    names = []
    for rule in rules():
        name = rule.get("alert")
        assert name and rule.get("expr") and "for" in rule, rule
        names.append(name)
        assert re.fullmatch(r"\d+[smh]", str(rule["for"])), name
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        page, _, anchor = annotations["runbook"].partition("#")
        assert page == "docs/operations.md" and anchor in headings, f"{name}: {anchor}"
        assert f"`{name}`" in OPERATIONS.read_text(), f"{name}: not in docs/operations.md"
    assert len(names) == len(set(names))


def test_the_bundle_covers_what_operators_were_promised() -> None:
    """Issue 32: queue lag, takeovers, decision latency, outcome_unknown, sandbox failures
    (and workers gone), each on the dashboard and alerted on."""
    promised = [
        "clawgate_queue_oldest_waiting_seconds",
        "clawgate_queue_lag_seconds_bucket",
        "clawgate_worker_takeovers_total",
        "clawgate_approval_decision_seconds_bucket",
        "outcome_unknown",
        "clawgate_sandbox_failures_total",
        "clawgate_workers_polling",
    ]
    shown = " ".join(expr for _, expr, _ in queries())
    alerted = " ".join(rule["expr"] for rule in rules())
    assert [name for name in promised if name not in shown or name not in alerted] == []


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("promtool is missing (Debian's prometheus package; .ci/run installs it)")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def _check(*args: str) -> str:
    command = [_promtool(), *args]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_promtool_loads_the_rules_and_parses_every_panel_query(tmp_path: Path) -> None:
    assert "SUCCESS: 16 rules found" in _check("check", "rules", str(ALERTS))
    recorded = [
        {"record": f"panel:{index}", "expr": re.sub(r"\$__\w+", "5m", expr)}
        for index, (_, expr, _) in enumerate(queries())
    ]
    panels_file = tmp_path / "panels.yml"
    panels_file.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": recorded}]}))
    _check("check", "rules", str(panels_file))


def test_the_alerts_fire_on_their_events_and_stay_quiet_otherwise(tmp_path: Path) -> None:
    """promtool's rule tests, one sample a minute: a healthy clawgate (counters served at 0
    from the start) fires nothing; each event fires its alert, no sooner than its `for`."""
    healthy = {
        "clawgate_workers_polling": "2x40",
        "clawgate_queue_oldest_waiting_seconds": "0x40",
        'clawgate_worker_takeovers_total{how="lapsed"}': "0x40",
        'clawgate_approvals_total{outcome="outcome_unknown"}': "0x40",
        'clawgate_retaken_calls_total{result="outcome_unknown"}': "0x40",
        "clawgate_jobs_dropped_total": "0x40",
        'clawgate_sandbox_failures_total{reason="setup"}': "0x40",
        "clawgate_redis_up": "1x40",
    }
    # alert: (the series that changes, its values, when it must fire, labels it carries)
    events: dict[str, tuple[str, str, str, dict[str, str]]] = {
        "ClawgateNoWorkerPolling": ("clawgate_workers_polling", "1 1 1 0 0 0", "5m", {}),
        "ClawgateQueueBacklog": ("clawgate_queue_oldest_waiting_seconds", "0+30x10", "6m", {}),
        "ClawgateRedisUnreachable": ("clawgate_redis_up", "1 1 0 0 0 0", "5m", {}),
        "ClawgateWorkerTakeovers": (
            'clawgate_worker_takeovers_total{how="lapsed"}',
            "0 2 4 6 6 6 6 6 6",
            "8m",
            {},
        ),
        "ClawgateJobsDropped": ("clawgate_jobs_dropped_total", "0 0 1 1 1 1", "5m", {}),
        "ClawgateOutcomeUnknown": (
            'clawgate_retaken_calls_total{result="outcome_unknown"}',
            "0 0 1 1 1 1",
            "5m",
            {},
        ),
        "ClawgateSandboxFailures": (
            'clawgate_sandbox_failures_total{reason="setup"}',
            "0 0 1 1 1 1",
            "5m",
            {"reason": "setup"},
        ),
    }
    severity = {rule["alert"]: rule["labels"]["severity"] for rule in rules()}

    def case(inputs: dict[str, str], checks: list[dict[str, Any]]) -> dict[str, Any]:
        series = [{"series": name, "values": values} for name, values in inputs.items()]
        return {"interval": "1m", "input_series": series, "alert_rule_test": checks}

    quiet = [{"alertname": name, "eval_time": "30m", "exp_alerts": []} for name in severity]
    tests = [case(healthy, quiet)]
    for alert, (series, values, at, labels) in events.items():
        fired = {"severity": severity[alert], **labels}
        early = {"alertname": alert, "eval_time": "1m", "exp_alerts": []}
        firing = {"alertname": alert, "eval_time": at, "exp_alerts": [{"exp_labels": fired}]}
        tests.append(case({**healthy, series: values}, [early, firing]))
    # Without their annotations: promtool would compare their rendered text too.
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    for rule in (rule for group in groups for rule in group["rules"]):
        del rule["annotations"]
    (tmp_path / "clawgate-alerts.yml").write_text(yaml.safe_dump({"groups": groups}))
    suite = tmp_path / "tests.yml"
    suite.write_text(yaml.safe_dump({"rule_files": ["clawgate-alerts.yml"], "tests": tests}))
    _check("test", "rules", str(suite))
