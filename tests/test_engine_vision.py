"""Images through every chat engine, on real llama.cpp with the test projectors (``tests/vision_models.py``).

The projectors have random weights in real shapes, so nothing here reads what the model says:
the tests check that an image reaches the model (the prompt grows by the image's tokens, the
next-token logits move with the image, two images give two answers), that the text before the
first image stays in the KV cache and an identical image at the same place is not encoded
again, and that a missing, damaged or foreign projector, or an image sent to an engine without
one, ends in one clear :class:`~agent.engines.base.LLMError`. Embedded: the tiny random Gemma 4
with a ``gemma4v`` projector (skipped without the Gemma 4 vocabulary fixture) and SmolLM2-135M
with an ``idefics3`` one; llama-server: SmolLM2 with ``--mmproj`` through the ``llama-server``
engine and the ``chat`` api (skipped where the server is not built).
"""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
from gemma4_model import tiny_gemma4
from vision_models import frame_bytes, gemma4v_projector, idefics3_projector, smollm2_vision_model

from agent.config import LLMConfig
from agent.engines import MEDIA_MARKER, Decoding, LLMError, make_chat_model
from agent.engines.embedded.model import ChatModel
from agent.engines.media import check_projector
from agent.engines.remote.body import build_request
from agent.engines.remote.chat_api import openai_messages
from agent.engines.remote.model import ServerChatModel, load_vocab
from agent.engines.remote.server_process import find_binary, server_args
from agent.engines.thinking import THINK_TAGS
from agent.models import resolve_model

BINARY = find_binary()
needs_server = pytest.mark.skipif(
    BINARY is None,
    reason="llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)",
)
SMOLLM2 = resolve_model("packaged:smollm2-135m", "LLM")
IMG_A, IMG_B = frame_bytes(1), frame_bytes(2, fmt=".jpg")


def small(**kw) -> LLMConfig:
    return LLMConfig(**{"n_ctx": 2048, "threads": 2, "temperature": 0.0, "max_tokens": 8, **kw})


def messages(n_images: int = 1) -> list[dict]:
    return [
        {"role": "system", "content": "You describe what the camera sees."},
        {"role": "user", "content": "What is in front of you? " + MEDIA_MARKER * n_images},
    ]


# --- the embedded engine, one model per projector family ---------------------------------------------
@pytest.fixture(scope="module", params=["idefics3", "gemma4v"])
def vlm(request):
    if request.param == "gemma4v":
        model = ChatModel(
            tiny_gemma4(request.getfixturevalue("gemma4_vocab")), small(), mmproj=gemma4v_projector()
        )
    else:
        model = ChatModel(smollm2_vision_model(), small(), mmproj=idefics3_projector())
    yield model
    model.close()


def cold(model: ChatModel, request: Decoding):
    model.llm.reset()  # an empty KV cache: every prompt token is evaluated
    return model.complete(request)


def test_an_image_reaches_the_embedded_model(vlm):
    assert vlm.vision and vlm.projector is not None
    prompt = vlm.render(messages())
    with_image = cold(vlm, Decoding(prompt, images=(IMG_A,)))
    without = cold(vlm, Decoding(prompt.replace(MEDIA_MARKER, "")))
    n_img = with_image.extra["image_tokens"]
    assert n_img >= 16 and with_image.extra["encode_ms"] > 0
    # the image's tokens plus the family's wrapper tokens (<|image>...<image|>, <fake_token_around_image>...)
    assert with_image.prompt_tokens - without.prompt_tokens >= n_img
    assert "image_tokens" not in without.extra
    logits = {name: vlm.next_token_logits(prompt, imgs) for name, imgs in [("a", (IMG_A,)), ("b", (IMG_B,))]}
    logits["none"] = vlm.next_token_logits(prompt.replace(MEDIA_MARKER, ""))
    assert np.abs(logits["a"] - logits["b"]).max() > 1e-3
    assert np.abs(logits["a"] - logits["none"]).max() > 1e-3
    assert np.allclose(
        vlm.next_token_logits(prompt, (IMG_A,)), logits["a"], atol=1e-4
    )  # the same image, cached


def test_the_text_before_the_image_stays_cached_and_the_same_image_is_not_encoded_again(vlm):
    prompt = vlm.render(messages())
    media = vlm.projector.prompt(prompt, (IMG_A,), vlm.prompt_bos())
    first_image, n_ids = media.images[0].start, len(media.ids)
    media.close()
    a = cold(vlm, Decoding(prompt, images=(IMG_A,)))
    assert a.prompt_tokens == media.n_cells
    b = vlm.complete(Decoding(prompt, images=(IMG_B,)))  # another frame: only what follows the text prefix
    assert b.prompt_tokens == a.prompt_tokens - first_image and b.extra["encode_ms"] > 0
    assert vlm.prefill(Decoding(prompt, images=(IMG_A,))) == a.prompt_tokens - first_image
    again = vlm.complete(Decoding(prompt, images=(IMG_A,)))  # prefilled: the image is in the cache
    assert again.prompt_tokens == 1 and again.extra["encode_ms"] == 0.0
    assert again.extra["image_tokens"] == a.extra["image_tokens"] and n_ids > first_image


def test_two_images_in_one_round_and_a_streamed_reply(vlm):
    prompt = vlm.render(messages(2))
    gen = cold(vlm, Decoding(prompt, images=(IMG_A, IMG_B), max_tokens=4))
    one = cold(vlm, Decoding(vlm.render(messages(1)), images=(IMG_A,), max_tokens=4))
    assert gen.extra["image_tokens"] > one.extra["image_tokens"] and gen.completion_tokens >= 1
    with pytest.raises(LLMError, match="2 image markers"):
        vlm.complete(Decoding(prompt, images=(IMG_A,)))
    with pytest.raises(LLMError, match="not a readable image"):
        vlm.complete(Decoding(vlm.render(messages()), images=(b"not an image at all",)))


def test_images_to_an_engine_without_vision_are_refused():
    model = ChatModel(SMOLLM2, small())
    try:
        assert model.vision is False
        prompt = model.render(messages())
        with pytest.raises(LLMError, match="cannot take images"):
            model.complete(Decoding(prompt, images=(IMG_A,)))
        assert model.complete(Decoding(prompt.replace(MEDIA_MARKER, ""), max_tokens=2)).completion_tokens
    finally:
        model.close()


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda d, good: d / "missing.gguf", "not found"),
        (lambda d, good: _write(d / "cut.gguf", good.read_bytes()[: good.stat().st_size // 2]), "truncated"),
        (lambda d, good: _write(d / "head.gguf", good.read_bytes()[:200]), "not a readable GGUF"),
        (lambda d, good: _write(d / "junk.gguf", b"\x00junk" * 4000), "not a readable GGUF"),
        (lambda d, good: SMOLLM2, "not a vision projector"),
    ],
    ids=["missing", "truncated", "cut-header", "garbage", "a-model"],
)
def test_a_bad_projector_is_one_clear_error_naming_the_file(tmp_path, make, needle):
    bad = make(tmp_path, idefics3_projector())
    with pytest.raises(LLMError, match=needle) as err:
        ChatModel(SMOLLM2, small(), mmproj=bad)
    assert str(bad) in str(err.value)


def test_a_projector_for_another_model_fails_in_libmtmd_with_its_reason():
    proj = gemma4v_projector()  # projects to 64 wide; SmolLM2 is 576 wide
    assert check_projector(proj).projection_dim == 64
    with pytest.raises(LLMError, match="failed to load") as err:
        ChatModel(smollm2_vision_model(), small(), mmproj=proj)
    assert str(proj) in str(err.value) and "libmtmd" in str(err.value)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- request bodies (no server) --------------------------------------------------------------------------
def test_server_flags_and_request_bodies_carry_the_images(tmp_path):
    proj = tmp_path / "mmproj.gguf"
    args = server_args(small(), tmp_path / "m.gguf", None, "127.0.0.1", 9000, proj, mmproj_offload=False)
    assert args[args.index("--mmproj") + 1] == str(proj) and "--no-mmproj-offload" in args
    assert "--mmproj" not in server_args(small(), tmp_path / "m.gguf", None, "127.0.0.1", 9000)
    msgs = messages(2)
    req = Decoding("<s>look " + MEDIA_MARKER * 2, messages=tuple(msgs), images=(IMG_A, IMG_B))
    common = dict(cfg=small(), n_ctx=2048, vocab=None, markers=THINK_TAGS, stats=None)
    sent = build_request(
        req, [1, 2], api="completions", media_marker="<M>", bos_text="<s>", native=True, **common
    )
    assert sent.path == "/completion" and sent.body["prompt"]["prompt_string"] == "look <M><M>"
    assert [base64.b64decode(b) for b in sent.body["prompt"]["multimodal_data"]] == [IMG_A, IMG_B]
    chat = build_request(req, [1, 2], api="chat", **common)
    parts = chat.body["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[2]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert openai_messages(msgs[:1]) == [msgs[0]]  # no images: content stays a string
    with pytest.raises(LLMError, match="2 image markers"):
        openai_messages(msgs, (IMG_A,))
    with pytest.raises(LLMError, match="extensions or the chat api"):
        build_request(req, [1], api="completions", extensions=False, **common)


# --- llama-server with --mmproj ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vision_server():
    if BINARY is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)")
    model = make_chat_model(small(engine="llama-server"), smollm2_vision_model(), mmproj=idefics3_projector())
    yield model
    model.close()


@needs_server
def test_llama_server_takes_images_on_both_apis(vision_server):
    srv = vision_server
    assert srv.vision and "--mmproj" in srv.server.args_for_port(1)
    prompt = srv.render(messages())
    text_only = srv.complete(Decoding(prompt.replace(MEDIA_MARKER, ""), seed=1))  # token ids: /completion
    assert text_only.completion_tokens >= 1
    a = srv.complete(Decoding(prompt, images=(IMG_A,)))
    b = srv.complete(Decoding(prompt, images=(IMG_B,)))
    again = srv.complete(Decoding(prompt, images=(IMG_A,)))
    assert a.prompt_tokens > 16 and b.prompt_tokens > 16  # the image is evaluated each time it changes
    # the server's count less the local text count: the image's tokens and its wrapper tokens
    assert a.extra["image_tokens"] == b.extra["image_tokens"] >= 32
    assert a.text != b.text  # two frames, two answers (greedy)
    # the server's own cache: image A after image B is evaluated again; the same prompt then costs 1
    assert (
        again.prompt_tokens == b.prompt_tokens
        and srv.complete(Decoding(prompt, images=(IMG_A,))).prompt_tokens == 1
    )
    chat = ServerChatModel(load_vocab(smollm2_vision_model(), small()), small(), srv.base_url, "chat")
    assert chat.vision  # asked from GET /props
    msgs = tuple(messages())
    c = chat.complete(Decoding(prompt, messages=msgs, images=(IMG_B,)))
    assert c.prompt_tokens > 16 and c.completion_tokens >= 1


@needs_server
def test_llama_server_refuses_images_without_a_projector_and_a_bad_projector_before_starting(tmp_path):
    bad = _write(tmp_path / "cut.gguf", idefics3_projector().read_bytes()[:5000])
    with pytest.raises(LLMError, match="truncated") as err:
        make_chat_model(small(engine="llama-server"), SMOLLM2, mmproj=bad)
    assert str(bad) in str(err.value)
    model = make_chat_model(small(engine="llama-server"), SMOLLM2)
    try:
        assert not model.vision
        with pytest.raises(LLMError, match="cannot take images"):
            model.complete(Decoding(model.render(messages()), images=(IMG_A,)))
        remote = ServerChatModel(load_vocab(SMOLLM2, small()), small(), model.base_url, "chat")
        assert remote.vision is False  # GET /props: no vision modality
    finally:
        model.close()
