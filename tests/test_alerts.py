"""conf/: the Grafana dashboard and the Prometheus alert rules name only metrics the
exporter emits (their PromQL parsed for metric names), ``promtool check rules`` passes and
``promtool test rules`` runs a unit test of each alert, and those tests catch a broken
rule."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from pyspark_ick.metrics import Collector

CONF = Path(__file__).resolve().parents[1] / "conf"
RULES = CONF / "prometheus" / "pyspark-ick-alerts.yml"
RULE_TESTS = CONF / "prometheus" / "pyspark-ick-alerts.test.yml"
DASHBOARD = CONF / "grafana" / "pyspark-ick.json"

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or"}
KEYWORDS |= {"unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions,
    keywords, label names (in ``{...}`` or ``by (...)``), strings, durations or Grafana
    variables."""
    expr = re.sub(r'"(?:\\.|[^"\\])*"', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\w+", "", expr)  # Grafana variables
    found = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        name, after = match[0], expr[match.end() :].lstrip()
        if after.startswith("(") or name.lower() in KEYWORDS:
            continue
        if re.fullmatch(r"\d+[smhdwy]", name) or (
            match.start() and expr[match.start() - 1].isdigit()
        ):
            continue  # a duration or a number's exponent
        found.add(name)
    return found


def emitted(client: Any) -> set[str]:
    """Every metric name the exporter's collector emits (counters with ``_total``,
    histograms as their ``_bucket``, ``_sum`` and ``_count`` series)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    return {
        family.name + suffix
        for family in Collector(client).collect()
        for suffix in suffixes.get(family.type, ("",))
    }


def rule_expressions() -> dict[str, str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    found = [t["expr"] for p in panels for t in p.get("targets", [])]
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    found += [
        re.sub(r"^label_values\((\w+),.*\)$", r"\1", v["definition"])
        for v in variables
        if v["type"] == "query"
    ]
    return found


def test_the_parser_finds_metric_names_and_nothing_else():
    expr = (
        'sum by (ick) (rate(pyspark_ick_committed_total{ick=~"$ick"}[$__rate_interval])) > 0 '
        "and on (ick) max without (shard) (pyspark_ick_queued offset 5m) > 1e3 "
        "unless absent(up)"
    )
    assert metric_names(expr) == {"pyspark_ick_committed_total", "pyspark_ick_queued", "up"}


def test_every_expression_names_only_metrics_the_exporter_emits(client):
    known = emitted(client)
    assert "pyspark_ick_committed_total" in known and "pyspark_ick_queued" in known
    exprs = [*rule_expressions().values(), *dashboard_expressions()]
    assert len(exprs) > 20
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= known, (expr, names - known)
    assert not metric_names("pyspark_ick_queue_size > 0") <= known  # a typo is caught


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: .ci/test.sh installs Debian's prometheus package"
    return subprocess.run(
        [binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_the_rules_and_runs_a_unit_test_of_each_alert():
    checked = promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing = {
        check["alertname"]
        for case in cases
        for check in case["alert_rule_test"]
        if check["exp_alerts"]
    }
    quiet = {
        check["alertname"]
        for case in cases
        for check in case["alert_rule_test"]
        if not check["exp_alerts"]
    }
    assert firing == set(rule_expressions()) == quiet  # each fires, and each stays quiet


def test_the_unit_tests_catch_a_broken_rule(tmp_path):
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    broken = RULES.read_text().replace("> 900", "> 9000").replace("> 300", "< 0")
    broken = broken.replace("sum by (ick, le)", "sum by (ick)")  # no le: no quantile
    (tmp_path / RULES.name).write_text(broken)
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert tested.returncode != 0
    assert "PysparkIckBacklogTooOld" in tested.stdout + tested.stderr
    assert "PysparkIckDehydratorOverdue" in tested.stdout + tested.stderr
    assert "PysparkIckFreshnessSloBreached" in tested.stdout + tested.stderr
