"""The bad-input campaign: every wrong input to the command line and the public Python API ends in a clear,
named error (or is accepted because it is right). Each case alone, then all of them as one figure."""

from __future__ import annotations

import pytest

from support import bad_inputs, bad_inputs_api, bad_inputs_cli

CASES = [*bad_inputs_cli.CASES, *bad_inputs_api.CASES]
MIN_CASES = 150


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return bad_inputs.materialize(tmp_path_factory.mktemp("bad-inputs"))


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, files):
    outcome, detail = case.run(files)
    assert outcome == "ok", f"{outcome}: {detail}"


def test_campaign(files):
    """All cases in one run: the figure gpu-check records, and the campaign's size."""
    from drvtma.runtime.figures import record_figure

    results = [(c.id, *c.run(files)) for c in CASES]
    figure = bad_inputs.summary(results)
    record_figure(figure)
    assert figure["tracebacks"] == 0 and figure["silent"] == 0 and figure["wrong"] == 0, bad_inputs.dumps(results)
    assert figure["cases"] >= MIN_CASES, f"only {figure['cases']} cases; the campaign promises {MIN_CASES}"
