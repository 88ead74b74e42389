"""Every collective and dtype on nodus against torch's own computation, on 2
and 3 processes; unsupported uses fail with a clear RuntimeError."""
import pytest

import _launch


@pytest.mark.parametrize("nprocs", [2, 3])
def test_collectives(nprocs):
    before = _launch.shm_files()
    res = _launch.run("collectives", nprocs)
    assert res.codes == [0] * nprocs, res.describe()
    for rank, rep in enumerate(res.reports):
        assert rep is not None, res.describe()
        assert rep["checks"] > 200, rep["checks"]
        assert not rep["failures"], "\n".join(rep["failures"])
    _launch.check_clean(before, res)


def test_errors_are_clear():
    res = _launch.run("errors", 1)
    assert res.codes == [0], res.describe()
    errors = res.reports[0]["errors"]
    expected = {
        "avg_int": "ReduceOp.AVG needs a floating-point tensor",
        "avg_bool": "ReduceOp.AVG needs a floating-point tensor",
        "band": "ReduceOp.BAND is not supported",
        "int16": "torch.int16 are not supported",
        "sparse": "sparse tensors are not supported",
        "gather_size": "allgather: this rank's output tensor has 4 elements but the input has 3",
        "split_sum": "split sizes add up to 3",
        "recv_any": "receiving from any source is not supported",
    }
    for name, text in expected.items():
        msg = errors[name]
        assert msg is not None, f"{name}: no error raised"
        assert text in msg and msg.startswith("nodus: "), f"{name}: {msg}"
    # torch checks this one itself before calling the backend.
    assert "different dtypes" in errors["coalesced_types"], errors["coalesced_types"]
