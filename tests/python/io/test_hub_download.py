"""MODEL as a Hugging Face repo id, downloaded from a hub on first use: pagoda against a fake hub on
loopback (fake_hub.py), checked against the local model's output and against huggingface_hub's own
reading of the cache it writes.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import socket
import subprocess

import pytest

from fake_hub import FakeHub, git_blob_sha1
from stories_gguf import write_stories_gguf

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
STORIES = SHARED / "models" / "stories260K"

COMMIT_MAIN = "a" * 40
COMMIT_V1 = "b" * 40
TOKEN = "hf_fake_secret"
REPO = "tiny/stories260K"
GATED = "tiny/gated"
GGUF_REPO = "tiny/stories260K-GGUF"
PROMPT = "Once upon a time"

pytestmark = pytest.mark.skipif(not (STORIES / "model.safetensors").exists(), reason=f"absent: {STORIES}")


def stories_files() -> dict[str, bytes]:
    names = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer.model",
             "tokenizer_config.json", "special_tokens_map.json", "model.safetensors", "stories260K.bin"]
    files = {n: (STORIES / n).read_bytes() for n in names}
    files["README.md"] = b"# stories260K\n"
    return files


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory) -> dict[str, bytes]:
    """Two GGUF "quantizations" of stories260K (F32 both, told apart by their general.name)."""
    pytest.importorskip("gguf")
    out = tmp_path_factory.mktemp("gguf")
    files = {}
    for quant in ("Q8_0", "Q4_K_M"):
        path = out / f"stories260K-{quant}.gguf"
        write_stories_gguf(STORIES, path, name=f"stories260K {quant}")
        files[path.name] = path.read_bytes()
    return files


@pytest.fixture
def hub(ggufs: dict[str, bytes]):
    h = FakeHub()
    main = stories_files()
    v1 = dict(main)
    v1["config.json"] = main["config.json"].replace(b"{", b'{\n  "pagoda_test_revision": "v1",', 1)
    h.add_repo(REPO, {COMMIT_MAIN: main, COMMIT_V1: v1}, {"main": COMMIT_MAIN, "v1": COMMIT_V1})
    h.add_repo(GATED, {COMMIT_MAIN: main}, {"main": COMMIT_MAIN}, token=TOKEN)
    q8 = ggufs["stories260K-Q8_0.gguf"]
    h.add_repo(GGUF_REPO, {COMMIT_MAIN: {
        "README.md": b"gguf\n",
        **ggufs,
        "stories260K-Q2_K-00001-of-00002.gguf": q8[:1000],
        "stories260K-Q2_K-00002-of-00002.gguf": q8[1000:],
    }}, {"main": COMMIT_MAIN})
    h.start()
    yield h
    h.stop()


def env_for(hub_url: str | None, cache: pathlib.Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE", "TRANSFORMERS_")) and k != "XDG_CACHE_HOME"}
    env["HF_HOME"] = str(cache / "hf_home")  # no token file unless a test writes one
    env["HF_HUB_CACHE"] = str(cache / "hub")
    if hub_url is not None:
        env["HF_ENDPOINT"] = hub_url
    env.update(extra)
    return env


def pagoda(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    assert PAGODA_BIN.exists(), f"pagoda binary not found at {PAGODA_BIN} (set PAGODA_BIN)"
    return subprocess.run([str(PAGODA_BIN), *args], capture_output=True, text=True, timeout=120, env=env)


def generate(model: str, env: dict[str, str], *extra: str, prompt: str = PROMPT) -> subprocess.CompletedProcess:
    return pagoda("generate", model, "--prompt", prompt, "--temperature", "0", "--max-tokens", "5",
                  "--device", "cpu", *extra, env=env)


def repo_dir(cache: pathlib.Path, repo: str) -> pathlib.Path:
    return cache / "hub" / ("models--" + repo.replace("/", "--"))


@pytest.fixture(scope="module")
def local_text() -> str:
    r = generate(str(STORIES), env_for(None, pathlib.Path("/nonexistent"), HF_HUB_OFFLINE="1"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    return r.stdout


def test_download_then_offline(hub: FakeHub, tmp_path: pathlib.Path, local_text: str) -> None:
    r = generate(REPO, env_for(hub.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    assert "downloaded" in r.stderr

    # The standard hub cache layout.
    rd = repo_dir(tmp_path, REPO)
    assert (rd / "refs" / "main").read_bytes() == COMMIT_MAIN.encode()
    snap = rd / "snapshots" / COMMIT_MAIN
    files = stories_files()
    want = ["config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json",
            "tokenizer.json", "tokenizer.model", "tokenizer_config.json"]
    assert sorted(p.name for p in snap.iterdir()) == want  # no .bin, no README
    for name in want:
        link = snap / name
        assert link.is_symlink(), name
        etag = hashlib.sha256(files[name]).hexdigest() if name.endswith(".safetensors") else git_blob_sha1(files[name])
        assert os.readlink(link) == f"../../blobs/{etag}", name
        assert link.read_bytes() == files[name], name
    assert sorted(p.name for p in (rd / "blobs").iterdir()) == sorted(
        os.path.basename(os.readlink(snap / n)) for n in want)
    # The token is never sent to the CDN; LFS content came from there.
    assert hub.paths("/cdn/") and all("authorization" not in r.headers for r in hub.paths("/cdn/"))

    # huggingface_hub (and so transformers and vLLM) finds the files in that cache.
    import huggingface_hub as hf

    for name in want:
        assert hf.try_to_load_from_cache(REPO, name, cache_dir=str(tmp_path / "hub")) == str(snap / name)

    # The hub is gone: the cached copy serves, offline or not (a complete cache needs no network).
    hub.stop()
    for extra in ({"HF_HUB_OFFLINE": "1"}, {"TRANSFORMERS_OFFLINE": "1"}, {}):
        r = generate(REPO, env_for(hub.url, tmp_path, **extra))
        assert r.returncode == 0, (extra, r.stderr)
        assert r.stdout == local_text
    hub.start()  # for the fixture's stop()


def test_pytorch_checkpoint_repo(tmp_path: pathlib.Path, local_text: str) -> None:
    """A repo whose weights are pytorch_model.bin shards and their index (as
    tools/torch_checkpoint.py writes them, torch.save's layout), no
    safetensors: those are downloaded, the model answers as the local one,
    and the snapshot then counts as complete (used with the hub gone, not
    in offline mode)."""
    import sys
    shards = tmp_path / "bin"
    shards.mkdir()
    subprocess.run([sys.executable, str(ROOT / "tools" / "torch_checkpoint.py"),
                    str(STORIES / "model.safetensors"), str(shards), "--writer", "python", "--shards", "2"],
                   check=True)
    files = {n: v for n, v in stories_files().items() if n != "model.safetensors"}
    files.update({p.name: p.read_bytes() for p in shards.iterdir()})
    h = FakeHub()
    h.add_repo("tiny/stories-bin", {COMMIT_MAIN: files}, {"main": COMMIT_MAIN})
    h.start()
    try:
        r = generate("tiny/stories-bin", env_for(h.url, tmp_path))
    finally:
        h.stop()
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    snap = repo_dir(tmp_path, "tiny/stories-bin") / "snapshots" / COMMIT_MAIN
    assert sorted(p.name for p in snap.glob("pytorch_model*")) == [
        "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin", "pytorch_model.bin.index.json"]
    assert not (snap / "stories260K.bin").exists()
    r = generate("tiny/stories-bin", env_for(h.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text


def test_tokenize_and_download_dir(hub: FakeHub, tmp_path: pathlib.Path) -> None:
    """tokenize takes a repo id and --download-dir picks the cache root instead of HF_HUB_CACHE."""
    local = pagoda("tokenize", str(STORIES), PROMPT, env=env_for(None, tmp_path))
    assert local.returncode == 0, local.stderr
    root = tmp_path / "elsewhere"
    r = pagoda("tokenize", REPO, PROMPT, "--download-dir", str(root), env=env_for(hub.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local.stdout
    assert (root / "models--tiny--stories260K" / "refs" / "main").read_text() == COMMIT_MAIN
    assert not (tmp_path / "hub").exists()
    r = pagoda("detokenize", REPO, "[1, 400, 401]", "--download-dir", str(root),
               env=env_for(hub.url, tmp_path, HF_HUB_OFFLINE="1"))
    assert r.returncode == 0, r.stderr


def test_offline_without_cache_says_how(hub: FakeHub, tmp_path: pathlib.Path) -> None:
    r = generate(REPO, env_for(hub.url, tmp_path, HF_HUB_OFFLINE="1"))
    assert r.returncode != 0
    assert "not found (offline" in r.stderr and "unset it to download" in r.stderr
    assert not hub.requests


def test_no_network_names_url_and_offline_mode(tmp_path: pathlib.Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    r = generate(REPO, env_for(f"http://127.0.0.1:{port}", tmp_path))
    assert r.returncode != 0
    assert f"http://127.0.0.1:{port}/api/models/{REPO}/revision/main" in r.stderr
    assert "HF_HUB_OFFLINE=1" in r.stderr


def test_unknown_repo_and_revision(hub: FakeHub, tmp_path: pathlib.Path) -> None:
    r = generate("tiny/absent", env_for(hub.url, tmp_path))
    assert r.returncode != 0 and "no such repo or revision" in r.stderr
    r = generate(REPO, env_for(hub.url, tmp_path), "--revision", "nope")
    assert r.returncode != 0 and "no such revision 'nope'" in r.stderr


def test_revision_of_a_local_path_is_refused(tmp_path: pathlib.Path) -> None:
    """A local MODEL has no revisions: --revision is refused, naming both, not ignored."""
    r = generate(str(STORIES), env_for(None, tmp_path, HF_HUB_OFFLINE="1"), "--revision", "v1")
    assert r.returncode != 0
    assert "--revision v1" in r.stderr and str(STORIES) in r.stderr and "local path" in r.stderr


def test_gated_repo_needs_token(hub: FakeHub, tmp_path: pathlib.Path, local_text: str) -> None:
    r = generate(GATED, env_for(hub.url, tmp_path))
    assert r.returncode != 0
    assert "gated or private" in r.stderr and "HF_TOKEN" in r.stderr
    r = generate(GATED, env_for(hub.url, tmp_path, HF_TOKEN="wrong"))
    assert r.returncode != 0 and "has no access" in r.stderr

    # The token file ($HF_HOME/token) as huggingface_hub writes it.
    (tmp_path / "hf_home").mkdir()
    (tmp_path / "hf_home" / "token").write_text(TOKEN + "\n")
    r = generate(GATED, env_for(hub.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    hub_requests = [q for q in hub.requests if not q.path.startswith("/cdn/")]
    assert hub_requests[-1].headers.get("authorization") == f"Bearer {TOKEN}"


def test_interrupted_download_resumes(hub: FakeHub, tmp_path: pathlib.Path, local_text: str) -> None:
    """A connection cut half-way is resumed with a Range request in the same run."""
    data = stories_files()["model.safetensors"]
    sha = hashlib.sha256(data).hexdigest()
    hub.cut_downloads[sha] = 1
    r = generate(REPO, env_for(hub.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    gets = [q for q in hub.paths(f"/cdn/{sha}") if q.method == "GET"]
    assert [q.headers.get("range") for q in gets] == [None, f"bytes={len(data) // 2}-"]
    assert (repo_dir(tmp_path, REPO) / "blobs" / sha).read_bytes() == data
    assert not (repo_dir(tmp_path, REPO) / "blobs" / f"{sha}.incomplete").exists()


def test_failed_download_resumes_in_next_run(hub: FakeHub, tmp_path: pathlib.Path, local_text: str) -> None:
    """A run that gives up leaves blobs/<etag>.incomplete; the next run continues it."""
    data = stories_files()["model.safetensors"]
    sha = hashlib.sha256(data).hexdigest()
    hub.cut_downloads[sha] = 1000
    r = generate(REPO, env_for(hub.url, tmp_path))
    assert r.returncode != 0
    assert f"{hub.url}/cdn/{sha}" in r.stderr and "run again to resume" in r.stderr
    partial = repo_dir(tmp_path, REPO) / "blobs" / f"{sha}.incomplete"
    have = partial.stat().st_size
    assert 0 < have < len(data)
    assert partial.read_bytes() == data[:have]

    hub.cut_downloads[sha] = 0
    first = len(hub.requests)
    r = generate(REPO, env_for(hub.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    gets = [q for q in hub.requests[first:] if q.path == f"/cdn/{sha}" and q.method == "GET"]
    assert [q.headers.get("range") for q in gets] == [f"bytes={have}-"]
    # Only the weights were missing: the small files were not fetched again.
    assert not [q for q in hub.requests[first:] if q.path.endswith("/config.json")]


def test_revision_branch_and_commit(hub: FakeHub, tmp_path: pathlib.Path, local_text: str) -> None:
    r = generate(REPO, env_for(hub.url, tmp_path), "--revision", "v1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    rd = repo_dir(tmp_path, REPO)
    assert (rd / "refs" / "v1").read_text() == COMMIT_V1
    assert not (rd / "refs" / "main").exists()
    assert b"pagoda_test_revision" in (rd / "snapshots" / COMMIT_V1 / "config.json").read_bytes()

    r = generate(REPO, env_for(hub.url, tmp_path), "--revision", COMMIT_MAIN)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (rd / "refs").iterdir()) == ["v1"]  # a commit id gets no ref
    assert b"pagoda_test_revision" not in (rd / "snapshots" / COMMIT_MAIN / "config.json").read_bytes()

    # Offline, each revision resolves to its own snapshot.
    hub.stop()
    for rev in ("v1", COMMIT_MAIN):
        r = generate(REPO, env_for(hub.url, tmp_path, HF_HUB_OFFLINE="1"), "--revision", rev)
        assert r.returncode == 0, (rev, r.stderr)
    r = generate(REPO, env_for(hub.url, tmp_path, HF_HUB_OFFLINE="1"), "--revision", "v2")
    assert r.returncode != 0 and "not found" in r.stderr
    hub.start()


def test_gguf_by_quant(hub: FakeHub, ggufs: dict[str, bytes], tmp_path: pathlib.Path, local_text: str) -> None:
    snap = repo_dir(tmp_path, GGUF_REPO) / "snapshots" / COMMIT_MAIN

    def picked() -> dict[str, str]:  # snapshot file -> its blob's sha256
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in snap.iterdir()}

    def sha(name: str) -> str:
        return hashlib.sha256(ggufs[name]).hexdigest()

    # No tag: Q4_K_M, as llama-server.
    r = generate(GGUF_REPO, env_for(hub.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    assert picked() == {"stories260K-Q4_K_M.gguf": sha("stories260K-Q4_K_M.gguf")}
    assert os.readlink(snap / "stories260K-Q4_K_M.gguf") == f"../../blobs/{sha('stories260K-Q4_K_M.gguf')}"

    # A tag missing from the cache is downloaded beside it (the tag matches case-insensitively).
    r = generate(f"{GGUF_REPO}:q8_0", env_for(hub.url, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == local_text
    assert picked() == {name: sha(name) for name in ggufs}

    # Offline, the tag picks among the cached files.
    hub.stop()
    for spec in (f"{GGUF_REPO}:Q8_0", GGUF_REPO):
        r = generate(spec, env_for(hub.url, tmp_path, HF_HUB_OFFLINE="1"))
        assert r.returncode == 0, (spec, r.stderr)
        assert r.stdout == local_text
    hub.start()

    r = generate(f"{GGUF_REPO}:IQ1_S", env_for(hub.url, tmp_path))
    assert r.returncode != 0
    assert "no .gguf file for quantization 'IQ1_S'; available: Q2_K, Q4_K_M, Q8_0" in r.stderr
    r = generate(f"{GGUF_REPO}:Q2_K", env_for(hub.url, tmp_path))
    assert r.returncode != 0 and "split GGUF" in r.stderr


def test_serve_hf_flag(hub: FakeHub, tmp_path: pathlib.Path) -> None:
    """serve -hf Org/Name means the GGUF repo at Q4_K_M (checked offline, so the server never starts)."""
    r = pagoda("serve", "-hf", GGUF_REPO, env=env_for(hub.url, tmp_path, HF_HUB_OFFLINE="1"))
    assert r.returncode != 0
    assert f"model '{GGUF_REPO}:Q4_K_M' not found (offline" in r.stderr
    r = pagoda("serve", str(STORIES), "--hf-repo", GGUF_REPO, env=env_for(hub.url, tmp_path))
    assert r.returncode == 2 and "not both" in r.stderr


@pytest.mark.parametrize("command", [["serve"], ["generate"], ["bench", "latency"], ["bench", "throughput"],
                                     ["tokenize"], ["detokenize"], ["chat-template"]], ids=" ".join)
def test_every_model_command_documents_the_hub(command: list[str], tmp_path: pathlib.Path) -> None:
    r = pagoda(*command, "--help", env=env_for(None, tmp_path))
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for needle in ("--revision", "--download-dir", "Hugging Face repo id", "downloaded into it on first use"):
        assert needle in text, (needle, r.stdout)
