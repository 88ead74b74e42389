"""A peer that dies makes the others raise within the timeout; wait(timeout)
honours its timeout; nothing is left behind."""
import _launch

TIMEOUT_S = 3.0


def test_dead_peer_raises():
    before = _launch.shm_files()
    res = _launch.run("dead_peer", 3, timeout=90, env={"NODUS_TIMEOUT_MS": str(int(TIMEOUT_S * 1000))})
    assert res.codes[2] == 17, res.describe()
    assert res.codes[:2] == [0, 0], res.describe()
    for rank in (0, 1):
        rep = res.reports[rank]
        assert rep["raised"], f"rank {rank} did not raise: {rep}"
        assert rep["message"].startswith("nodus: allreduce: "), rep["message"]
        assert rep["elapsed"] < TIMEOUT_S + 5, f"rank {rank} raised after {rep['elapsed']:.1f} s"
        assert rep["completed"] and rep["future_raised"], rep
        assert rep["later_raised"] and rep["later_elapsed"] < 2, rep
    _launch.check_clean(before, res)


def test_wait_timeout():
    res = _launch.run("wait_timeout", 2, timeout=90)
    assert res.codes == [0, 0], res.describe()
    rep = res.reports[0]
    assert rep["completed_early"] is False and rep["success_early"] is False, rep
    assert rep["raised"], rep
    assert "not complete after 300 ms" in rep["message"], rep["message"]
    assert 0.29 <= rep["elapsed"] < 2.0, rep["elapsed"]
    assert rep["wait"] is True and rep["completed"] and rep["success"], rep
    assert rep["value"] == 3.0 and res.reports[1]["value"] == 3.0, res.reports
