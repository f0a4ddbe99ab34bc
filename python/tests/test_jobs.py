"""The Python client against a real head: a `starling head` process whose launched pool starts
real node agents, and Python payloads that run on them.

The `starling` binary is `$STARLING_BIN`, else the workspace's `target/debug/starling`. Every
wait is bounded; the head's log is printed when a test fails.
"""

import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest

import starling

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("STARLING_BIN") or str(ROOT / "target" / "debug" / "starling")
WAIT = 120


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A head with a launched pool `py` of two one-CPU nodes; yields its address."""
    root = tmp_path_factory.mktemp("head")
    data = root / "data"
    log = open(root / "head.log", "w")
    proc = subprocess.Popen(
        [BIN, "head", "--port", "0", "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        addr = proc.stdout.readline().strip()
        assert addr.count(":") == 1, f"the head's first line is not an address: {addr!r}"
        token = (data / "token").read_text().strip()
        os.environ["STARLING_HEAD"] = addr
        os.environ["STARLING_TOKEN"] = token
        subprocess.run(
            [BIN, "pool", "create", "py", "--max-nodes", "2", "--num-cpus-per-node", "1"],
            check=True,
            timeout=WAIT,
        )
        yield addr
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if sys.exc_info()[0] is not None:
            print((root / "head.log").read_text())


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_a_py_file_runs_on_every_instance_and_sees_them(head, tmp_path):
    path = script(
        tmp_path,
        "hello.py",
        """
        import os, sys
        import starling
        nodes = starling.nodes()
        print(os.environ["GREETING"], os.environ["STARLING_INSTANCE_ID"], sys.argv[1:],
              "nodes=%d" % len(nodes))
        """,
    )
    # No shebang, no execute bit: it runs with python3.
    job = starling.submit_file(
        path, "py", target_instances=2, args=["a", "b"], env_vars={"GREETING": "hi"},
        name="hello-py",
    )
    assert isinstance(job.id, int)
    assert job.wait(timeout=WAIT) == "DONE", job.get_logs()
    assert job.status == "DONE"
    assert "hi 0 ['a', 'b'] nodes=2" in job.get_logs(), job.get_logs()
    assert job.get_logs(instance_id=1) == ""
    assert job.result() is None
    info = job.info()
    assert info["name"] == "hello-py" and info["exit_code"] == 0
    assert [i["state"] for i in info["instances"]] == ["STOPPED", "STOPPED"]
    listed = [j for j in starling.list_jobs() if j["id"] == job.id]
    assert listed and listed[0]["status"] == "DONE"
    assert starling.get_job(job.id).status == "DONE"
    starling.delete_job(job.id)
    with pytest.raises(starling.StarlingError, match="unknown job"):
        starling.get_job(job.id).status


def test_a_directory_runs_a_command_or_a_file(head, tmp_path):
    pkg = tmp_path / "app" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text("import sys\nprint('module', sys.argv[1:])\n")
    (tmp_path / "app" / "main.py").write_text("import sys\nprint('file', sys.argv[1:])\n")
    job = starling.submit_directory(
        tmp_path / "app", "py", entrypoint=["python3", "-m", "pkg.main"], args=["x"]
    )
    assert job.wait(timeout=WAIT) == "DONE", job.get_logs()
    assert "module ['x']" in job.get_logs()
    job = starling.submit_directory(tmp_path / "app", "py", entrypoint="main.py --fast")
    assert job.wait(timeout=WAIT) == "DONE", job.get_logs()
    assert "file ['--fast']" in job.get_logs()


def test_a_failing_payload_says_why_and_a_running_one_can_be_cancelled(head, tmp_path):
    path = script(tmp_path, "fail.py", "print('about to fail')\n1 / 0\n")
    job = starling.submit_file(path, "py")
    assert job.wait(timeout=WAIT) == "FAILED"
    message = job.info()["message"]
    assert "exited with code 1" in message and "ZeroDivisionError" in message, message
    with pytest.raises(starling.StarlingError, match="ZeroDivisionError"):
        job.result()

    path = script(tmp_path, "sleepy.py", "import time\nprint('started', flush=True)\ntime.sleep(300)\n")
    job = starling.submit_file(path, "py", target_instances=2)
    deadline = time.monotonic() + WAIT
    while "started" not in job.get_logs():
        assert time.monotonic() < deadline, "the payload did not start"
        time.sleep(0.1)
    assert job.cancel() in ("CANCELLING", "CANCELLED")
    assert job.wait(timeout=WAIT) == "CANCELLED"


def test_bad_requests_are_refused_with_the_reason(head, tmp_path):
    path = script(tmp_path, "ok.py", "print('ok')\n")
    with pytest.raises(starling.StarlingError, match="unknown pool `nope`"):
        starling.submit_file(path, "nope")
    with pytest.raises(starling.StarlingError, match="min_instances must be in 1..=1"):
        starling.submit_file(path, "py", min_instances=2)
    with pytest.raises(starling.StarlingError, match="nor a program on PATH"):
        starling.submit_directory(tmp_path, "py", entrypoint="missing.py")
    with pytest.raises(starling.StarlingError, match="cannot reach|unreachable|connect"):
        starling.JobClient("127.0.0.1:1")
