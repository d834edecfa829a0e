"""A small real HTTP server on 127.0.0.1 with tokenizer routes, for the ``server`` tokenizer.

``GET /v1/models`` (with a ``root``), ``POST /tokenize`` (a prompt, or chat
messages rendered with the tokenizer's chat template) and ``POST
/detokenize``, in vLLM's shapes (``vllm/entrypoints/serve/tokenize/protocol.py``),
counting with a ``tokenizers.Tokenizer``. The chat template is rendered here
with jinja2 directly, independently of the code under test. Every request's
path is recorded, so a test can prove that building samples calls nothing.
Switches: ``token_strs=False`` answers ``"token_strs": null`` as a server
without ``return_token_strs`` would (and, in llama.cpp's shape, ignores
``with_pieces``); ``tokenize=False`` answers 404 on both routes, as a server
without them does.

``shape="llama.cpp"`` speaks llama-server's instead (its
``tools/server/server-context.cpp``): ``POST /tokenize`` takes ``{"content",
"add_special" (default false), "parse_special", "with_pieces"}`` and answers
``{"tokens": [...]}`` (``{"id", "piece"}`` objects with pieces), and a body
without ``content`` (vLLM's ``{"prompt"}``) gets ``{"tokens": []}``; ``POST
/apply-template`` answers the chat template's text (its leading BOS text
stripped when the tokenizer adds a BOS, as llama-server does before tokenizing
it with ``add_special``); ``POST /detokenize`` answers ``{"content"}``.
``shape="empty"`` answers ``{"tokens": []}`` to every ``/tokenize``, whatever
was asked: a route that is there but counts nothing.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

from pytest_llmperf.apis import Api as ApiKind
from pytest_llmperf.client.endpoint import Endpoint, Timeouts


class ReferenceCounter:
    """What a vLLM-like server counts, computed independently of the code under test."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        config = json.loads((folder / "tokenizer_config.json").read_text())
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self.template = env.from_string(config["chat_template"])
        self.specials = {k: v for k, v in config.items() if k.endswith("_token") and v}

    def tokenize_body(self, body: dict[str, Any], token_strs: bool = True) -> dict[str, Any]:
        if "messages" in body:
            text = self.template.render(
                messages=body["messages"],
                add_generation_prompt=body.get("add_generation_prompt", True),
                **self.specials,
            )
            enc = self.backend.encode(
                text, add_special_tokens=body.get("add_special_tokens", False)
            )
        else:
            enc = self.backend.encode(
                body["prompt"], add_special_tokens=body.get("add_special_tokens", True)
            )
        strs = enc.tokens if token_strs and body.get("return_token_strs") else None
        return {"count": len(enc.ids), "max_model_len": 1024, "tokens": enc.ids, "token_strs": strs}

    def detokenize_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"prompt": self.backend.decode(body["tokens"], skip_special_tokens=False)}

    def llama_tokenize_body(self, body: dict[str, Any], pieces: bool = True) -> dict[str, Any]:
        if "content" not in body:
            return {"tokens": []}  # llama-server reads only "content"
        enc = self.backend.encode(
            body["content"], add_special_tokens=body.get("add_special", False)
        )
        if not (pieces and body.get("with_pieces")):
            return {"tokens": enc.ids}
        out = []
        for token in enc.ids:
            piece: Any = self.backend.decode([token], skip_special_tokens=False)
            if "\ufffd" in piece:  # not valid UTF-8 alone: llama-server sends the bytes
                piece = list(piece.encode())
            out.append({"id": token, "piece": piece})
        return {"tokens": out}

    def llama_apply_template_body(self, body: dict[str, Any]) -> dict[str, Any]:
        text = self.template.render(
            messages=body["messages"], add_generation_prompt=True, **self.specials
        )
        bos = self.specials.get("bos_token")
        if bos and self.adds_bos and text.startswith(bos):
            text = text[len(bos) :]
        return {"prompt": text}

    def llama_detokenize_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"content": self.backend.decode(body["tokens"], skip_special_tokens=False)}

    @property
    def adds_bos(self) -> bool:
        return len(self.backend.encode("a", add_special_tokens=True).ids) > len(
            self.backend.encode("a", add_special_tokens=False).ids
        )

    def prompt_tokens(self, sample: Any, api: str) -> int:
        """``usage.prompt_tokens`` for ``sample`` as the client sends it (apis/chat.py)."""
        if api == "chat":
            return self.tokenize_body({"messages": sample.messages()})["count"]
        history = "".join(f"{turn['content']}\n" for turn in sample.history)
        return self.tokenize_body({"prompt": history + sample.prompt})["count"]


class TokenizeServer:
    """``with TokenizeServer(folder) as srv: srv.url`` (``http://127.0.0.1:PORT``)."""

    def __init__(
        self,
        folder: Path,
        *,
        model: str = "tiny-org/tiny-llama",
        root: str | None = None,
        token_strs: bool = True,
        tokenize: bool = True,
        shape: str = "vllm",
    ) -> None:
        assert shape in ("vllm", "llama.cpp", "empty"), shape
        self.reference = ReferenceCounter(folder)
        self.model = model
        self.root = root
        self.token_strs = token_strs
        self.tokenize = tokenize
        self.shape = shape
        self.bodies: list[dict[str, Any]] = []  # every POST body, in order
        self.calls: list[str] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> TokenizeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def endpoint(self, api: ApiKind = "chat", model: str | None = None) -> Endpoint:
        """An endpoint for this server, its model resolved (as after the preflight)."""
        timeouts = Timeouts.from_seconds(10)
        return Endpoint(self.url + "/v1", model=model or self.model, api=api, timeouts=timeouts)

    def models(self) -> dict[str, Any]:
        if self.shape == "llama.cpp":  # llama-server: no root, a "meta" block about the model
            meta = {"vocab_type": 2, "n_vocab": 400, "n_ctx_train": 1024, "n_params": 1}
            entry = {"id": self.model, "object": "model", "owned_by": "llamacpp", "meta": meta}
            return {"object": "list", "data": [entry]}
        entry = {"id": self.model, "object": "model", "owned_by": "test", "root": self.root}
        return {"object": "list", "data": [entry]}

    def routes(self) -> dict[str, Any]:
        """Route -> the function answering a body there, in this server's shape."""
        ref = self.reference
        if self.shape == "empty":
            return {"/tokenize": lambda body: {"tokens": []}}
        if self.shape == "llama.cpp":
            return {
                "/tokenize": lambda body: ref.llama_tokenize_body(body, self.token_strs),
                "/apply-template": ref.llama_apply_template_body,
                "/detokenize": ref.llama_detokenize_body,
            }
        return {
            "/tokenize": lambda body: ref.tokenize_body(body, self.token_strs),
            "/detokenize": ref.detokenize_body,
        }


def _handler(server: TokenizeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stalls

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            server.calls.append(f"GET {self.path}")
            if self.path == "/v1/models":
                self._send(200, server.models())
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            server.calls.append(f"POST {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            server.bodies.append(body)
            routes = server.routes()
            if self.path not in routes or not server.tokenize:
                self._send(404, {"detail": "Not Found"})
                return
            if body.get("model") not in (None, server.model):
                self._send(404, {"error": {"message": "no such model", "code": 404}})
                return
            self._send(200, routes[self.path](body))

    return Handler
