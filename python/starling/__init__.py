"""Starling's jobs API from Python: submit payloads to compute pools and manage the jobs.

The module-level functions use one client of the head at ``STARLING_HEAD`` (with the token in
``STARLING_TOKEN``), made on first use; ``JobClient(addr)`` makes one of your own::

    import starling

    job = starling.submit_file("train.py", "gpu", target_instances=3, args=["--epochs", "5"])
    print(job.id, job.status)
    job.wait(timeout=600)
    job.show_logs(instance_id=1)

Inside a payload, ``starling.nodes()`` lists the job's instances.
"""

import os
import sys

from ._native import Job, JobClient, StarlingError

__all__ = [
    "Job",
    "JobClient",
    "StarlingError",
    "client",
    "delete_job",
    "get_job",
    "list_jobs",
    "nodes",
    "submit_directory",
    "submit_file",
]

_client = None


def client():
    """The client the module-level functions use (of ``STARLING_HEAD``), made on first use."""
    global _client
    if _client is None:
        _client = JobClient()
    return _client


def submit_file(path, pool, **options):
    """Submits the file at ``path`` to ``pool``: an executable, or a ``.py`` file (run with
    ``python3``, or ``interpreter=[...]``). Options: ``target_instances``, ``min_instances``,
    ``args``, ``env_vars``, ``name``, ``instance_timeout`` (seconds),
    ``max_instance_failures``, ``interpreter``. Returns a ``Job``."""
    return client().submit_file(os.fspath(path), pool, **options)


def submit_directory(dir, pool, entrypoint, **options):
    """Submits the directory ``dir`` to ``pool``; ``entrypoint`` runs from its root: a file of
    it (``"main.py"``, ``"run.sh --fast"``) or a program of the nodes'
    (``"python3 -m pkg.main"``, or ``["python3", "main.py"]``). Options as ``submit_file``."""
    return client().submit_directory(os.fspath(dir), pool, entrypoint=entrypoint, **options)


def list_jobs():
    """Every job the head knows, oldest first, as dicts."""
    return client().list_jobs()


def get_job(id):
    """The job with id ``id``."""
    return client().get_job(int(id))


def delete_job(id):
    """Deletes an ended job and its logs."""
    client().delete_job(int(id))


def nodes():
    """Inside a job's payload: the job's instances (``STARLING_JOB_ID``); elsewhere: every node
    of the cluster. Each is a dict with ``id``, ``address``, ``alive``, ``resources``."""
    job = os.environ.get("STARLING_JOB_ID")
    return client().nodes(int(job) if job else None)
