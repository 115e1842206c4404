"""Chat-model engines behind one protocol: ``[llm] engine`` picks where the model runs.

=================  ======================================================================
``embedded``       llama-cpp-python in this process (:mod:`.embedded`; default)
``llama-server``   llama.cpp's server as a child process started with flags from ``[llm]`` and
                   ``[llm.server]``, restarted when it dies (:mod:`.remote.server_process`)
``openai``         an OpenAI-compatible server elsewhere (llama-server, Ollama, vLLM, NIM):
                   ``[llm.openai] url``, the API key from the environment variable named by
                   ``api_key_env``
=================  ======================================================================

Every engine gives the conversation the same :class:`~agent.engines.base.ChatEngine` protocol:
a round is one frozen :class:`~agent.engines.request.Decoding` that each engine compiles (the
embedded one into its sampler, processors, jump-forward and drafting; a server into request
fields, :mod:`.remote.body`), so the turn loop, the streaming parsers, grammar mode, the thinking
budget, ``conversational_mode``, KV-cache reuse of the byte-stable prompt prefix and the stop
signal behave the same. :data:`ENGINES` maps each name to a factory that imports its backend
only when called. The engines import nothing of the conversation.

Images (:attr:`~agent.engines.request.Decoding.images`): an engine built with a vision projector
(``mmproj``; a remote server that says it takes images) has ``vision`` and takes rounds with
images placed by :data:`~agent.engines.request.MEDIA_MARKER` (:mod:`.media`).

Modules: :mod:`.base` (protocol, :class:`~agent.engines.base.Generation`, errors),
:mod:`.request`, :mod:`.media` (image markers, the projector file check), :mod:`.thinking`,
:mod:`.priors` (the token-level tool and copy priors), :mod:`.grammar`, :mod:`.embedded`,
:mod:`.remote`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.engines.base import ChatEngine, Generation, LLMError
from agent.engines.request import MEDIA_MARKER, Decoding, Thinking

if TYPE_CHECKING:
    from agent.config import LLMConfig
    from agent.control import CpuArbiter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Vision:
    """How an engine takes images.

    Attributes:
        mmproj: The vision projector GGUF (embedded, llama-server), or None.
        offload: The projector may run on the GPU.
        remote: For ``openai``: the server takes images (None: ask its ``GET /props``).
    """

    mmproj: Path | None = None
    offload: bool = True
    remote: bool | None = None


def _embedded(cfg: LLMConfig, path: Path | None, arbiter: CpuArbiter | None, vision: Vision) -> ChatEngine:
    from agent.engines.embedded.model import ChatModel

    if path is None:
        raise LLMError('[llm] engine = "embedded" needs a model file ([llm] model)')
    return ChatModel(path, cfg, arbiter=arbiter, mmproj=vision.mmproj, mmproj_offload=vision.offload)


def _llama_server(
    cfg: LLMConfig, path: Path | None, arbiter: CpuArbiter | None, vision: Vision
) -> ChatEngine:
    from agent.engines.media import check_projector
    from agent.engines.remote.model import ServerChatModel, load_vocab
    from agent.engines.remote.server_process import (
        LlamaServerProcess,
        ServerStartError,
        find_binary,
        server_args,
    )
    from agent.models import resolve_model

    if path is None:
        raise LLMError('[llm] engine = "llama-server" needs a model file ([llm] model)')
    srv = cfg.server
    binary = find_binary(srv.binary)
    if binary is None:
        where = srv.binary or "the build cache (launch/build_llama_server.sh) or $PATH"
        raise LLMError(
            f"llama-server not found in {where}; build it with launch/build_llama_server.sh "
            f'(launch/setup.sh test does) or set [llm.server] binary, or use engine = "embedded"'
        )
    draft = resolve_model(srv.draft_model, "draft model") if srv.draft_model else None
    if vision.mmproj is not None:
        check_projector(vision.mmproj)  # a clear message before the server's own start failure
    vocab = load_vocab(path, cfg)
    proc = LlamaServerProcess(
        binary,
        lambda port: server_args(cfg, path, draft, srv.host, port, vision.mmproj, vision.offload),
        host=srv.host,
        port=srv.port,
        startup_timeout_s=srv.startup_timeout_s,
        backoff_s=srv.restart_backoff_s,
        backoff_max_s=srv.restart_backoff_max_s,
        log_file=srv.log_file,
    )
    try:
        proc.start()
    except ServerStartError as e:
        raise LLMError(str(e)) from None
    return ServerChatModel(
        vocab,
        cfg,
        lambda: proc.url,
        "completions",
        server=proc,
        timeout_s=srv.request_timeout_s,
        vision=vision.mmproj is not None,
    )


def _openai(cfg: LLMConfig, path: Path | None, arbiter: CpuArbiter | None, vision: Vision) -> ChatEngine:
    from agent.engines.remote.model import ServerChatModel, load_vocab

    oa = cfg.openai
    headers = {}
    if oa.api_key_env:
        key = os.environ.get(oa.api_key_env)
        if not key:
            raise LLMError(
                f"[llm.openai] api_key_env = {oa.api_key_env!r}: that environment variable is not set"
            )
        headers["Authorization"] = f"Bearer {key}"
    api = oa.api
    if api == "auto":
        api = "completions" if path is not None else "chat"
    if api == "completions" and path is None:
        raise LLMError(
            '[llm.openai] api = "completions" renders the prompt locally: set [llm] model to the GGUF'
        )
    extensions = oa.llama_cpp_extensions
    if extensions == "auto":
        from agent.engines.remote.http import is_llama_server

        extensions = is_llama_server(oa.url, headers)
        log.info("model server %s: llama.cpp's extensions %s", oa.url, "on" if extensions else "off")
    return ServerChatModel(
        load_vocab(path, cfg),
        cfg,
        oa.url,
        api,
        headers=headers,
        model_name=oa.model_name,
        extensions=bool(extensions),
        timeout_s=oa.request_timeout_s,
        tool_choice=oa.tool_choice,
        vision=vision.remote,
    )


ENGINES: dict[str, Callable[[LLMConfig, Path | None, CpuArbiter | None, Vision], ChatEngine]] = {
    "embedded": _embedded,
    "llama-server": _llama_server,
    "openai": _openai,
}
"""Engine name (``[llm] engine``) → factory ``(cfg, model path or None, arbiter, vision) -> ChatEngine``.

Only the embedded engine decodes on this machine's CPU and yields it to speech synthesis."""


def make_chat_model(
    cfg: LLMConfig,
    path: Path | None,
    arbiter: CpuArbiter | None = None,
    mmproj: Path | None = None,
    *,
    mmproj_offload: bool = True,
    vision: bool | None = None,
) -> ChatEngine:
    """Build the chat model ``[llm] engine`` names.

    Args:
        cfg: ``[llm]`` settings; ``n_ctx`` must already be a number.
        path: The resolved ``[llm] model`` file (None only for ``engine = "openai"`` with
            ``model = ""``).
        arbiter: Shares the CPU with speech synthesis (embedded engine only).
        mmproj: A vision projector GGUF for the model (embedded: loaded with libmtmd;
            llama-server: ``--mmproj``); the engine then has ``vision``. Not used by ``openai``.
        mmproj_offload: The projector may run on the GPU (False: on the CPU,
            ``--no-mmproj-offload``).
        vision: ``openai`` only: the remote server takes images (None: ask its ``GET /props``,
            llama-server's ``modalities.vision``; servers without it count as text-only).

    Returns:
        The chat model. For ``llama-server`` the server is running and healthy; it is stopped
        by ``close()`` or at interpreter exit.

    Raises:
        agent.engines.base.LLMError: the model cannot be loaded, llama-server is missing or does not
            start (the message names its log file), the API key variable is unset, or the
            projector is missing, damaged, not a vision projector or does not fit the model (the
            message names the file; build the model again without ``mmproj`` to run on text).
        agent.models.ModelNotFoundError: the draft model reference points at nothing.
    """
    try:
        factory = ENGINES[cfg.engine]
    except KeyError:
        raise ValueError(
            f"unknown [llm] engine {cfg.engine!r}; expected one of {', '.join(ENGINES)}"
        ) from None
    return factory(cfg, path, arbiter, Vision(mmproj, mmproj_offload, vision))


__all__ = [
    "ENGINES",
    "MEDIA_MARKER",
    "ChatEngine",
    "Decoding",
    "Generation",
    "LLMError",
    "Thinking",
    "Vision",
    "make_chat_model",
]
