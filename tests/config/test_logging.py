"""Logs carry the request and workload ids (X-Request-ID, the task's workload), as text or
as one JSON object per line (GPUBROKER_LOG_FORMAT), and a bad format stops start-up."""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from broker import tasks
from broker.logcontext import LogContextFilter
from config.env import env_choice
from config.logformat import LOG_FORMATS, JsonFormatter

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_lines():
    """The product's handler set-up (the ids filter, the JSON formatter) on the root logger;
    returns a function giving the lines written so far, parsed."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(LogContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_a_requests_log_lines_carry_the_id_it_was_given_and_the_response_echoes_it(client, db, json_lines):
    response = client.get("/no-such-page/", HTTP_X_REQUEST_ID="edge-7f3a.42")
    assert response.status_code == 404
    assert response["X-Request-ID"] == "edge-7f3a.42"
    not_found = [line for line in json_lines() if line["logger"] == "django.request"]
    assert not_found and not_found[0]["message"] == "Not Found: /no-such-page/"
    assert not_found[0]["request_id"] == "edge-7f3a.42"
    logging.getLogger("after").warning("between requests")  # the id ended with its request
    assert "request_id" not in json_lines()[-1]


@pytest.mark.parametrize("bogus", ["x" * 65, "two words", 'quote"d', "line\nbreak", "é"])
def test_a_bogus_request_id_is_replaced_by_a_generated_one(client, db, json_lines, bogus):
    response = client.get("/no-such-page/", HTTP_X_REQUEST_ID=bogus)
    generated = response["X-Request-ID"]
    assert generated != bogus and len(generated) == 32 and int(generated, 16) >= 0
    assert [line["request_id"] for line in json_lines() if line["logger"] == "django.request"] == [generated]


def test_a_request_without_an_id_gets_a_fresh_one_each_time(client, db):
    first, second = (client.get("/healthz")["X-Request-ID"] for _ in range(2))
    assert first != second and len(first) == 32


def test_a_task_acting_on_a_workload_logs_lines_carrying_that_workload_id(monkeypatch, json_lines):
    def placing(*, workload_id: int) -> None:  # the service, as far as its logging goes
        logging.getLogger("broker.services.placing.cycle").warning("no destination fits yet")

    monkeypatch.setattr(tasks, "workload_place", placing)
    tasks.place_workload.delay(4242)  # eager, as in the tests and the demo
    logging.getLogger("after").warning("after the task")
    during, after = json_lines()[-2:]
    assert during["message"] == "no destination fits yet" and during["workload_id"] == 4242
    assert "workload_id" not in after


def test_the_json_formatter_writes_one_parseable_object_per_line_with_the_exception_text(json_lines):
    log = logging.getLogger("broker.services.dispatching.send")
    try:
        raise ValueError("cluster said no")
    except ValueError:
        log.exception("dispatch failed\nsecond line of the message")
    log.warning("and %s more", 1)
    failed, more = json_lines()  # two records, two lines, each one JSON object
    assert failed["level"] == "ERROR" and failed["logger"] == "broker.services.dispatching.send"
    assert failed["message"] == "dispatch failed\nsecond line of the message"
    assert "Traceback" in failed["exception"] and "ValueError: cluster said no" in failed["exception"]
    assert failed["time"].endswith("+00:00") and "T" in failed["time"]
    assert more["message"] == "and 1 more" and "exception" not in more


def test_a_bad_log_format_names_the_variable(monkeypatch):
    monkeypatch.setenv("GPUBROKER_LOG_FORMAT", "yaml")
    with pytest.raises(ImproperlyConfigured, match="GPUBROKER_LOG_FORMAT: expected one of text, json, got 'yaml'"):
        env_choice("GPUBROKER_LOG_FORMAT", "text", LOG_FORMATS)
    monkeypatch.setenv("GPUBROKER_LOG_FORMAT", " JSON ")
    assert env_choice("GPUBROKER_LOG_FORMAT", "text", LOG_FORMATS) == "json"


def _run(code: str, log_format: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUBROKER_LOG_FORMAT": log_format, "PYTHONPATH": str(ROOT),
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_start_up_stops_on_a_bad_log_format():
    result = _run("import django; django.setup()", "yaml")
    assert result.returncode != 0 and "GPUBROKER_LOG_FORMAT: expected one of text, json" in result.stderr


# a process set up as the web process and a Celery worker are: Django's set-up, then Celery's
_LOG_IN_A_WORKER = """
import django, logging
django.setup()
from broker.logcontext import workload_bound
from config.celery import app
app.log.setup(loglevel="INFO")  # what a worker does at start; it must keep the settings' logging
with workload_bound(7):
    logging.getLogger("broker.tasks").warning("acting on it")
"""


def test_json_chosen_in_the_environment_makes_each_line_of_a_worker_json():
    result = _run(_LOG_IN_A_WORKER, "json")
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stderr.strip().splitlines()[-1])
    assert line["message"] == "acting on it" and line["workload_id"] == 7 and line["level"] == "WARNING"


def test_the_text_format_shows_the_ids_too():
    result = _run(_LOG_IN_A_WORKER, "text")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith("WARNING broker.tasks [workload_id=7] acting on it")
