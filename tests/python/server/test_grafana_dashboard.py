"""docs/grafana/pagoda-dashboard.json: a Grafana dashboard (Prometheus
datasource variable, model_name variable) whose every query names series
that pagoda's /metrics exports."""
import json
import pathlib
import re

import requests

from server_harness import API_KEY, MODEL

DASHBOARD = pathlib.Path(__file__).resolve().parents[3] / "docs" / "grafana" / "pagoda-dashboard.json"
SERIES = re.compile(r"\b((?:vllm|pagoda):[a-zA-Z0-9_:]+)")


def queries(dashboard):
    for panel in dashboard["panels"]:
        for t in panel.get("targets", []):
            yield panel["title"], t["expr"]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            yield var["name"], var["query"]["query"]


def test_dashboard_is_grafana_json_with_a_prometheus_datasource_variable():
    d = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["model_name"]["type"] == "query"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["targets"], p["title"]


def test_every_queried_series_is_exported(base_url):
    text = requests.get(base_url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30).text
    exported = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if line and line[0] != "#"}
    model_series = {line.split("{", 1)[0] for line in text.splitlines() if f'model_name="{MODEL}"' in line}
    assert exported == model_series  # every series carries the model_name label the dashboard filters on
    named = 0
    for where, expr in queries(json.loads(DASHBOARD.read_text())):
        for series in SERIES.findall(expr):
            named += 1
            assert series in exported, (where, series)
    assert named >= 30
