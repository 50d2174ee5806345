"""The endpoint client's early stop: it reads a streamed chat reply only until the caller's test holds,
then closes the connection, which is what makes an OpenAI-compatible server stop generating."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ferrylm.prompts import code_block_closed
from ferrylm.serve import client

PIECES = ["Here", " it is:\n", "```python\n", "    return x", " * 2\n", "```", "\nThis doubles", " x."] + [" more"] * 40


class _Streamer(BaseHTTPRequestHandler):
    sent: list[int] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["stream"] is True and body["messages"][0]["content"] == "double x"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        n = 0
        try:
            for piece in PIECES:
                self.wfile.write(
                    f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': piece}}]})}\n\n".encode()
                )
                self.wfile.flush()
                n += 1
                time.sleep(0.02)
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        _Streamer.sent.append(n)

    def log_message(self, *args):
        pass


@pytest.fixture
def streamer():
    """The streaming server's URL, its count of pieces sent per request starting empty."""
    _Streamer.sent = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Streamer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_chat_stops_reading_at_the_closed_code_block_and_hangs_up(streamer):
    reply = client.chat(streamer, "m", [{"role": "user", "content": "double x"}], 64, until=code_block_closed)
    assert reply == ["Here it is:\n```python\n    return x * 2\n```"]
    deadline = time.time() + 5
    while not _Streamer.sent and time.time() < deadline:
        time.sleep(0.05)
    assert _Streamer.sent and _Streamer.sent[0] < len(PIECES)  # the server saw the client go


def test_timed_stream_keeps_the_whole_reply_and_times_its_first_piece(streamer):
    t = client.timed_chat_stream(streamer, "m", [{"role": "user", "content": "double x"}], 64, ignore_eos=False)
    assert t.text == "".join(PIECES)
    # the first piece is sent at once, the last after every 20 ms pause
    assert t.ttft_s < t.total_s and t.total_s >= 0.02 * (len(PIECES) - 1)
