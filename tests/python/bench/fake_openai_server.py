"""A deterministic fake OpenAI-compatible server for testing `pagoda bench serve`.

Each completion request is answered on a schedule the test can recompute:
  prompt_len  = number of token ids (or of whitespace-separated words for text)
  fail        = prompt_len % fail_mod == 0 (HTTP 500), when fail_mod > 0
  ttft delay  = ttft_s[prompt_len % len(ttft_s)] after the request arrives
  chunks      = ceil(max_tokens / tokens_per_chunk), one every itl_s seconds
  usage       = {prompt_tokens: prompt_len + usage_prompt_offset,
                 completion_tokens: max_tokens} when stream_options.include_usage
                 is set and send_usage is True
Every request is logged (arrival time, parsed body, prompt_len) in `log`.
/tokenize counts whitespace-separated words (ids = 1 + sum of bytes % 997);
/detokenize maps ids to "w<id>" words.
"""

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the default 5 makes a burst of connections wait for SYN retries
    daemon_threads = True


class FakeConfig:
    def __init__(self, **kw):
        self.ttft_s = kw.get("ttft_s", [0.05])
        self.itl_s = kw.get("itl_s", 0.02)
        self.tokens_per_chunk = kw.get("tokens_per_chunk", 1)
        self.fail_mod = kw.get("fail_mod", 0)
        self.send_usage = kw.get("send_usage", True)
        self.usage_prompt_offset = kw.get("usage_prompt_offset", 0)
        self.tokenize = kw.get("tokenize", True)
        self.chunked = kw.get("chunked", True)
        self.model = kw.get("model", "fake-model")


def word_id(word):
    return 1 + sum(word.encode()) % 997


def prompt_length(body):
    if "messages" in body:
        return len(body["messages"][-1]["content"].split())
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        return len(prompt)
    return len(prompt.split())


def num_chunks(max_tokens, tokens_per_chunk):
    return math.ceil(max_tokens / tokens_per_chunk)


class FakeServer:
    def __init__(self, config=None):
        self.config = config or FakeConfig()
        self.log = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.httpd = _Server(("127.0.0.1", 0), self._handler_class())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def schedule(self, prompt_len, max_tokens):
        """(fail, ttft delay, number of chunks) of a request."""
        c = self.config
        fail = c.fail_mod > 0 and prompt_len % c.fail_mod == 0
        return fail, c.ttft_s[prompt_len % len(c.ttft_s)], num_chunks(max_tokens, c.tokens_per_chunk)

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            def do_GET(self):
                if self.path == "/v1/models":
                    return self._json(200, {"object": "list", "data": [{"id": server.config.model, "object": "model"}]})
                self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                arrival = time.monotonic()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":
                    if not server.config.tokenize:
                        return self._json(404, {"error": {"message": "no tokenizer"}})
                    ids = [word_id(w) for w in body["prompt"].split()]
                    return self._json(200, {"tokens": ids, "count": len(ids), "max_model_len": 4096})
                if self.path == "/detokenize":
                    return self._json(200, {"prompt": " ".join("w%d" % t for t in body["tokens"])})
                if self.path not in ("/v1/completions", "/v1/chat/completions"):
                    return self._json(404, {"error": {"message": "not found"}})
                self._complete(arrival, body)

            def _complete(self, arrival, body):
                chat = self.path.endswith("chat/completions")
                max_tokens = body["max_completion_tokens"] if chat else body["max_tokens"]
                plen = prompt_length(body)
                fail, ttft, chunks = server.schedule(plen, max_tokens)
                with server.lock:
                    server.log.append({"arrival": arrival, "body": body, "prompt_len": plen,
                                       "auth": self.headers.get("Authorization"), "path": self.path})
                if fail:
                    return self._json(500, {"error": {"message": "planned failure"}})
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._stream(arrival, body, chat, plen, max_tokens, ttft, chunks)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, text):
                data = text.encode()
                if server.config.chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                else:
                    self.wfile.write(data)
                self.wfile.flush()

            def _stream(self, arrival, body, chat, plen, max_tokens, ttft, chunks):
                c = server.config
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                if c.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.flush()
                for i in range(chunks):
                    due = arrival + ttft + i * c.itl_s
                    time.sleep(max(0.0, due - time.monotonic()))
                    if chat:
                        choice = {"index": 0, "delta": {"content": "tok%d " % i}, "finish_reason": None}
                    else:
                        choice = {"index": 0, "text": "tok%d " % i, "finish_reason": None}
                    self._send("data: " + json.dumps({"id": "x", "choices": [choice]}) + "\n\n")
                include = body.get("stream_options", {}).get("include_usage", False)
                if include and c.send_usage:
                    usage = {"prompt_tokens": plen + c.usage_prompt_offset, "completion_tokens": max_tokens,
                             "total_tokens": plen + c.usage_prompt_offset + max_tokens}
                    self._send("data: " + json.dumps({"id": "x", "choices": [], "usage": usage}) + "\n\n")
                self._send("data: [DONE]\n\n")
                if c.chunked:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler
