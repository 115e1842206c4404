"""The benchmark's floor: arithmetic, minimum silence, speed probes and the report (no models)."""

from __future__ import annotations

import pytest

from agent.config import load_config
from agent.engines import Decoding, Generation
from agent.events import Timing
from tools.bench.latency import (
    FLOOR_PARTS,
    ModelSpeed,
    _report,
    _Turn,
    endpoint_min_silence_ms,
    floor_ratio,
    format_report,
    measure_model_speed,
    new_prompt_tokens,
    tts_first_chunk_ms,
    turn_floor,
)

SPEED = ModelSpeed(decode_tokens_per_s=100.0, prefill_tokens_per_s=500.0)


def test_floor_is_the_sum_of_the_unavoidable_parts():
    parts = turn_floor(200, 30, new_tokens=50, sentence_tokens=12, tts_first_chunk_ms=60, speed=SPEED)
    # 50 tokens at 500/s = 100 ms; 12 tokens at 100/s = 120 ms.
    assert parts == {
        "min_silence": 200.0,
        "asr_tail": 30.0,
        "prefill": 100.0,
        "first_sentence": 120.0,
        "tts_first_chunk": 60.0,
        "floor": 510.0,
    }
    assert set(FLOOR_PARTS) | {"floor"} == set(parts)


def test_floor_parts_never_go_negative_and_unmeasured_speeds_count_zero():
    parts = turn_floor(500, -5, 40, 10, -1, ModelSpeed(0.0, 0.0))
    assert parts["asr_tail"] == 0 and parts["tts_first_chunk"] == 0
    assert parts["prefill"] == 0 and parts["first_sentence"] == 0 and parts["floor"] == 500


def test_floor_ratio():
    assert floor_ratio(1020, 510) == 2.0
    assert floor_ratio(-1, 510) is None and floor_ratio(800, 0) is None


def test_min_silence_follows_the_endpoint_rule(tmp_path):
    cfg = load_config()
    assert cfg.turn.end_of_turn == "semantic" and 0 < cfg.turn.early_asr_ms < cfg.turn.short_silence_ms
    assert endpoint_min_silence_ms(cfg) == cfg.turn.early_asr_ms  # the final transcript starts there
    late = cfg.model_copy(update={"turn": cfg.turn.model_copy(update={"early_asr_ms": 0})})
    assert endpoint_min_silence_ms(late) == cfg.turn.short_silence_ms
    silence = cfg.model_copy(update={"turn": cfg.turn.model_copy(update={"end_of_turn": "silence"})})
    assert endpoint_min_silence_ms(silence) == cfg.vad.min_silence_ms


class FakeModel:
    """Tokens are characters; decoding takes 10 ms a token, prefill 2 ms a token (a fake clock)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(chr(t) for t in tokens)

    def stream(self, request: Decoding, gen: Generation, stop=None):
        prompt, max_tokens = request.prompt, request.max_tokens or 8
        self.prompts.append(prompt)
        gen.prompt_tokens = len(prompt)
        gen.ttft_ms = 2.0 * len(prompt) + 10.0
        gen.completion_tokens = max_tokens
        gen.tokens_per_s = 100.0 if max_tokens > 1 else 0.0
        yield from ["x"] * max_tokens


def test_speed_probes_measure_decode_and_prefill_on_fresh_prompts():
    model = FakeModel()
    speed = measure_model_speed(model, decode_tokens=16, prefill_tokens=50, repeats=2)
    assert speed.decode_tokens_per_s == 100.0
    assert speed.prefill_tokens_per_s == pytest.approx(500.0)  # 50 tokens in 110 - 10 ms (one decode step)
    # Every probe starts differently, so the KV cache cannot reuse one for the next.
    firsts = [p[:20] for p in model.prompts]
    assert len(set(firsts)) == len(firsts) == 4


def test_new_prompt_tokens_count_what_follows_the_cached_prefix():
    model = FakeModel()

    def render(history):
        return (
            "<system>tools</system>"
            + "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in history)
            + "<a>"
        )

    n = new_prompt_tokens(model, render, {"role": "user", "content": "What time is it?"})
    assert n == len("What time is it?</user><a>")


def test_tts_first_chunk_times_the_first_sentence_only():
    class TTS:
        def synthesize(self, text):
            yield "chunk"
            raise AssertionError("only the first chunk is waited for")

    assert tts_first_chunk_ms(TTS(), "Hello there.") >= 0
    assert tts_first_chunk_ms(type("Mute", (), {"synthesize": lambda self, t: iter(())})(), "...") == -1


def _turn(file, v2v, endpoint=250, asr_done=280, sentence="Sure!", base=1500.0):
    t = Timing(0, endpoint_ms=endpoint, asr_done_ms=asr_done, first_played_ms=v2v, asr_ms=300)
    return _Turn(
        file, t, sentence, new_tokens=25, multi=False, baseline_ms=base, sentence_tokens=5, tts_first_ms=50
    )


def test_report_has_the_floor_per_turn_and_in_summary():
    r = _report([_turn("a.wav", 900), _turn("b.wav", 1300, asr_done=-1)], [1, 1], SPEED, 200)
    # 200 + 300 (the final transcript's ASR, wherever it ran) + 25/500 s + 5/100 s + 50 = 650
    a, b = r["per_turn"]
    assert a["floor_ms"] == 650 and a["floor_ratio"] == round(900 / 650, 3)
    assert a["parts_ms"]["asr_tail"] == b["parts_ms"]["asr_tail"] == 300
    assert r["floor_ms"]["p50"] == pytest.approx(650)
    assert r["floor_ratio"] == pytest.approx((900 / 650 + 1300 / 650) / 2, abs=1e-3)
    assert r["floor_parts_ms"]["min_silence"] == 200
    assert r["model_speed"] == {"decode_tokens_per_s": 100.0, "prefill_tokens_per_s": 500.0, "probe_ms": 0.0}
    assert r["turns_per_file"] == [1, 1] and r["turns"] == 2
    text = format_report(r)
    assert "floor" in text and "a.wav" in text and "decode 100 tokens/s" in text


def test_report_without_turns_is_still_printable():
    r = _report([], [0], SPEED, 200)
    assert r["floor_ratio"] is None and r["per_turn"] == []
    assert "floor" in format_report(r)


def test_report_averages_the_drafters_acceptance_over_drafted_turns_only():
    drafted = [
        _Turn(
            "a.wav",
            Timing(1, first_played_ms=900, tokens_per_s=30.0, draft_acceptance=0.5),
            "Sure!",
            25,
            False,
        ),
        _Turn(
            "b.wav",
            Timing(2, first_played_ms=800, tokens_per_s=32.0, draft_acceptance=0.75),
            "Ok.",
            25,
            False,
        ),
        _Turn("c.wav", Timing(3, first_played_ms=700, tokens_per_s=20.0), "Hi.", 25, False),  # -1: no drafter
    ]
    r = _report(drafted, [1, 1, 1], SPEED, 200)
    assert r["draft_acceptance"] == 0.625 and r["tokens_per_s"]["p50"] == 30.0
    assert "drafter acceptance: 0.625" in format_report(r)
    assert _report(drafted[2:], [1], SPEED, 200)["draft_acceptance"] is None
    assert "drafter acceptance: no drafter" in format_report(_report(drafted[2:], [1], SPEED, 200))
