"""Fixtures for tests/python/server: the shared server, auth, an SDK client,
and `running` for tests that start `pagoda serve` with their own flags."""
import openai
import pytest

from server_harness import API_KEY, REAL, launch
from serve_process import serve


@pytest.fixture(scope="session")
def server():
    # The load test's 256 streams all run at once.
    proc = launch(max_num_seqs=256, max_waiting=4096)
    yield proc
    code = proc.stop()
    assert code == 0, f"server exited with {code}:\n{proc.output()}"


@pytest.fixture(scope="session")
def base_url(server):
    return server.url


@pytest.fixture
def fake_only():
    if REAL:
        pytest.skip("needs the fake engine's scripted output (stories260K cannot produce it)")


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)




@pytest.fixture
def running():
    """Starts servers (serve_process.serve) for a test and stops them after it
    (each must exit 0)."""
    procs = []

    def start(*args, **kw):
        proc = serve(*args, **kw)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        assert proc.stop() == 0, proc.output()
