"""Fixtures for tests/python/server: the shared server, auth, an SDK client."""
import openai
import pytest

from server_harness import API_KEY, REAL, launch


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


