"""DDP on nodus: identical parameters on every rank, the same losses as the
same run on gloo."""
import math

import pytest

import _launch


@pytest.mark.parametrize("nprocs", [2, 3])
def test_ddp_matches_gloo(nprocs):
    res = _launch.run("ddp", nprocs, env={"DDP_STEPS": "6"})
    assert res.codes == [0] * nprocs, res.describe()
    for rank, rep in enumerate(res.reports):
        assert rep["same_everywhere"], f"rank {rank}: parameters differ across ranks"
        assert len(rep["nodus_losses"]) == 6
        for step, (a, b) in enumerate(zip(rep["nodus_losses"], rep["gloo_losses"])):
            assert math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7), f"rank {rank} step {step}: nodus {a} gloo {b}"
        assert rep["max_param_diff"] < 1e-5, rep["max_param_diff"]
    # It trained: the loss moved.
    assert res.reports[0]["nodus_losses"][0] != res.reports[0]["nodus_losses"][-1]
