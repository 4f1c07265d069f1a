"""Faults under load: a server killed with SIGKILL in the middle of concurrent writes loses nothing it acknowledged."""

import http.client
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.subprocesses import BASE_DIR, free_port

pytestmark = pytest.mark.slow


def start_server(env: dict, log_path: Path) -> tuple[subprocess.Popen, str]:
    """Start ``manage.py serve`` on a free port; return the process and its base URL once it answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=BASE_DIR,
        env=env,
        stdout=log_path.open("a"),
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, log_path.read_text()
        try:
            with urllib.request.urlopen(f"{base}/api/v1/health/", timeout=5) as response:
                if response.status == 200:
                    return process, base
        except (urllib.error.URLError, ConnectionError):
            pass
        assert time.monotonic() < deadline, "the server did not answer within 30 seconds"
        time.sleep(0.1)


class Writer(threading.Thread):
    """Remember new memories over REST against whichever server ``target()`` names, until told to stop.

    Keeps the key and id of every write the server acknowledged; a write whose answer
    never came (the server died) may or may not be stored, and is not counted.
    """

    def __init__(self, name: str, token: str, target):
        super().__init__(name=name)
        self.token, self.target = token, target
        self.stop = threading.Event()
        self.acknowledged: dict[str, int] = {}
        self.refused: list[str] = []

    def run(self):
        number = 0
        while not self.stop.is_set():
            number += 1
            key = f"{self.name}-{number}"
            body = json.dumps(
                {
                    "namespace": "faults",
                    "key": key,
                    "content": f"Writer {self.name} stored note number {number} during the fault test.",
                }
            )
            connection = http.client.HTTPConnection(self.target().removeprefix("http://"), timeout=30)
            try:
                connection.request(
                    "POST",
                    "/api/v1/memories/",
                    body=body,
                    headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
                )
                response = connection.getresponse()
                answer = response.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                time.sleep(0.02)  # the server is gone; the next write goes to the one that replaces it
                continue
            finally:
                connection.close()
            if response.status == 201:
                self.acknowledged[key] = json.loads(answer)["id"]
            else:
                self.refused.append(f"{response.status}: {answer[:200]!r}")


def test_a_server_killed_during_concurrent_writes_loses_no_acknowledged_write(instance, tmp_path):
    token = instance.create_api_keys(writer={})["writer"]
    log = tmp_path / "servers.log"
    env = dict(instance.env, MEMORY_API_WRITES_PER_MINUTE="0")  # four writers on one key, as fast as they can
    first, first_base = start_server(env, log)
    second, second_base = start_server(env, log)
    bases = {"first": first_base}
    writers = [
        Writer(f"w{number}", token, (lambda: bases["first"]) if number % 2 else (lambda: second_base))
        for number in range(4)
    ]
    try:
        for writer in writers:
            writer.start()
        deadline = time.monotonic() + 20
        while sum(len(writer.acknowledged) for writer in writers) < 40:
            assert time.monotonic() < deadline, "the writers made no progress"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait()
        written_before_restart = sum(len(writer.acknowledged) for writer in writers)
        first, bases["first"] = start_server(env, log)
        while sum(len(writer.acknowledged) for writer in writers) < written_before_restart + 40:
            assert time.monotonic() < deadline + 30, "no writes were acknowledged after the restart"
            time.sleep(0.05)
    finally:
        for writer in writers:
            writer.stop.set()
        for writer in writers:
            writer.join(timeout=60)
        for process in (first, second):
            process.terminate()
            process.wait(timeout=20)

    assert [refusal for writer in writers for refusal in writer.refused] == []
    acknowledged = {key: memory_id for writer in writers for key, memory_id in writer.acknowledged.items()}
    stored = json.loads(
        instance.run("""
        import json
        from django.db import connection
        from django.db.models import Count
        from memories.models import Memory, Revision
        keys = {}
        for key, memory_id in Memory.objects.filter(namespace="faults").values_list("key", "pk"):
            keys.setdefault(key, []).append(memory_id)
        texts = dict(Revision.objects.filter(memory__namespace="faults").values_list("memory_id")
                     .annotate(count=Count("id")).values_list("memory_id", "count"))
        revisions = Revision.objects.filter(tombstone=False).count()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_document")
            documents = cursor.fetchone()[0]
            cursor.execute("SELECT count(*) FROM search_vectors")
            vectors = cursor.fetchone()[0]
        print(json.dumps({"keys": keys, "texts": texts, "revisions": revisions, "documents": documents,
                          "vectors": vectors}))
    """)
    )
    for key, memory_id in acknowledged.items():
        assert stored["keys"].get(key) == [memory_id], key
        assert stored["texts"][str(memory_id)] == 1, key
    # The engine's postings and the vectors match the revisions; doctor checks the FTS5 indexes.
    assert stored["documents"] == stored["revisions"] == stored["vectors"]
    doctor = instance.manage("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
