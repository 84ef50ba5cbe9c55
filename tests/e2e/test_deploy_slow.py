"""The slow tier of tests/component/test_deploy.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import pytest

from tests.component import test_deploy as _deploy
from tests.component.test_deploy import (
    _args,
    _compose,
    _exec_form,
    _final_stage,
    _run_check,
    _service_env,
)

# Fixtures of the fast tier's module, shared here.
health_server = _deploy.health_server


@pytest.mark.e2e  # waits out timers or runs processes: the slow tier
def test_dockerfile_healthcheck_hits_healthz_on_clawgate_port(
    health_server: tuple[int, int],
) -> None:
    port, status = health_server
    healthchecks = _args(_final_stage(), "HEALTHCHECK")
    assert len(healthchecks) == 1
    _options, sep, command = healthchecks[0].partition("CMD ")
    assert sep
    code = _run_check(_exec_form(command), {"CLAWGATE_PORT": str(port)})
    assert (code == 0) == (status == 200)


@pytest.mark.e2e  # waits out timers or runs processes: the slow tier
def test_compose_worker_healthcheck_hits_its_metrics_port(health_server: tuple[int, int]) -> None:
    port, status = health_server
    worker = _compose()["services"]["worker"]
    test = worker["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert "CLAWGATE_METRICS_PORT" in " ".join(test)
    assert _service_env(worker)["CLAWGATE_METRICS_PORT"] in {str(p) for p in worker["expose"]}
    code = _run_check(test[1:], {"CLAWGATE_METRICS_PORT": str(port)})
    assert (code == 0) == (status == 200)
