"""A small Hugging Face hub on loopback for download tests (no network).

Serves what huggingface_hub and pagoda ask of the real hub:
  GET  /api/models/{repo}/revision/{rev}  -> {"id", "sha", "siblings": [{"rfilename"}]}
  HEAD/GET /{repo}/resolve/{rev}/{file}   -> regular files: 200, ETag = git blob sha1;
                                            LFS files: 302 to /cdn/{sha256} with X-Linked-Etag,
                                            X-Linked-Size; always X-Repo-Commit
  GET  /cdn/{sha256}                      -> the bytes, with Range support (206)
Errors carry X-Error-Code like the hub: RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo.
A gated repo answers 401 without "Authorization: Bearer <token>" and 403 with another token.
`cut_downloads[sha256] = n` makes the next n CDN answers for that blob stop half-way and close the
connection. Every request is recorded in `requests` (method, path, headers).
"""
from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    commits: dict[str, dict[str, bytes]]  # commit id -> {file: content}
    refs: dict[str, str]                  # branch or tag -> commit id
    token: str | None = None              # gated: the token that opens it


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    cut_downloads: dict[str, int] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)  # sha256 -> LFS content

    def add_repo(self, repo_id: str, commits: dict[str, dict[str, bytes]], refs: dict[str, str],
                 token: str | None = None) -> None:
        self.repos[repo_id] = Repo(commits, refs, token)
        for files in commits.values():
            for name, data in files.items():
                if name.endswith(LFS_SUFFIXES):
                    self.blobs[hashlib.sha256(data).hexdigest()] = data

    def start(self) -> None:
        hub = self

        class Handler(_Handler):
            fake = hub

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self, prefix: str) -> list[Request]:
        return [r for r in self.requests if r.path.startswith(prefix)]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    # --- answers -----------------------------------------------------------------------------
    def _send(self, status: int, headers: dict[str, str], body: bytes = b"", head: bool = False) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _error(self, status: int, code: str, head: bool, extra: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": code}).encode()
        self._send(status, {"X-Error-Code": code, "Content-Type": "application/json", **(extra or {})}, body, head)

    def _dispatch(self, head: bool) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        self.fake.requests.append(Request(self.command, path, {k.lower(): v for k, v in self.headers.items()}))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
            return self._api(f"{parts[2]}/{parts[3]}", "/".join(parts[5:]), head)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]), head)
        if parts[0] == "cdn" and len(parts) == 2:
            return self._cdn(parts[1], head)
        self._error(404, "NotFound", head)

    def _repo(self, repo_id: str, head: bool) -> Repo | None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", head)
            return None
        if repo.token is not None:
            auth = self.headers.get("Authorization", "")
            if not auth:
                self._error(401, "GatedRepo", head)
                return None
            if auth != f"Bearer {repo.token}":
                self._error(403, "GatedRepo", head)
                return None
        return repo

    def _commit(self, repo: Repo, revision: str, head: bool) -> str | None:
        commit = repo.refs.get(revision, revision)
        if commit not in repo.commits:
            self._error(404, "RevisionNotFound", head)
            return None
        return commit

    def _api(self, repo_id: str, revision: str, head: bool) -> None:
        repo = self._repo(repo_id, head)
        if repo is None:
            return
        commit = self._commit(repo, revision, head)
        if commit is None:
            return
        body = {"id": repo_id, "sha": commit, "siblings": [{"rfilename": f} for f in repo.commits[commit]]}
        self._send(200, {"Content-Type": "application/json"}, json.dumps(body).encode(), head)

    def _resolve(self, repo_id: str, revision: str, file: str, head: bool) -> None:
        repo = self._repo(repo_id, head)
        if repo is None:
            return
        commit = self._commit(repo, revision, head)
        if commit is None:
            return
        data = repo.commits[commit].get(file)
        if data is None:
            return self._error(404, "EntryNotFound", head, {"X-Repo-Commit": commit})
        if file.endswith(LFS_SUFFIXES):
            sha256 = hashlib.sha256(data).hexdigest()
            self._send(302, {"X-Repo-Commit": commit, "ETag": f'"{git_blob_sha1(b"pointer " + data[:16])}"',
                             "X-Linked-Etag": f'"{sha256}"', "X-Linked-Size": str(len(data)),
                             "Location": f"{self.fake.url}/cdn/{sha256}"}, b"", head)
            return
        self._send(200, {"X-Repo-Commit": commit, "ETag": f'"{git_blob_sha1(data)}"'}, data, head)

    def _cdn(self, sha256: str, head: bool) -> None:
        data = self.fake.blobs.get(sha256)
        if data is None:
            return self._error(404, "NotFound", head)
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data):
                return self._send(416, {"Content-Range": f"bytes */{len(data)}"}, b"", head)
        part = data[start:]
        status = 206 if rng else 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(part)))
        self.send_header("Accept-Ranges", "bytes")
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if head:
            return
        if self.fake.cut_downloads.get(sha256, 0) > 0:
            self.fake.cut_downloads[sha256] -= 1
            self.wfile.write(part[:len(part) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(part)
