"""The launchers users have: torchrun (the example) and
torch.multiprocessing.spawn; env:// is what every other test uses."""
import os
import subprocess
import sys
import tempfile

import _launch


def test_torchrun_example():
    example = os.path.join(_launch.SOURCE_DIR, "examples", "torch_ddp.py")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # torchrun of torch 1.13 under Python 3.11 cannot parse its default
    # "--redirects 0 --tee 0" (enum.Flag no longer iterates zero members);
    # these values work on every version.
    with tempfile.TemporaryDirectory(prefix="nodus-torchrun-") as logs:
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               "--redirects", "1", "--tee", "1", "--log_dir", logs, example, "--steps", "5"],
                              env=env, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "backend nodus, 2 processes" in proc.stdout, proc.stdout
    assert "final loss" in proc.stdout, proc.stdout


def test_multiprocessing_spawn():
    res = _launch.run("spawn", 1)
    assert res.codes == [0], res.describe()
    assert res.reports[0]["values"] == [3.0, 3.0], res.reports
