"""The chat model's resident memory as its context fills (``bolt-agent soak``'s warm-up growth).

llama.cpp reserves the compute buffer for the worst case (a full batch against a full context)
but a page of it is only resident once written. Without flash attention the buffer holds the
KQ score matrix, ``n_kv x batch x heads`` floats, so each turn that reaches further into the
context touches more of it: a 1,000-turn soak kept growing for ~200 turns. With flash attention
there is no such matrix. The measurement runs in a child process of its own, so its memory is
only the model's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import load_config

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys
from agent.config import load_config
from agent.engines.embedded.model import ChatModel
from agent.models import resolve_model

def anonymous_mib():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) / 1024

cfg = load_config(None).llm.model_copy(update={"n_ctx": 2048, "flash_attn": sys.argv[1] == "on"})
model = ChatModel(resolve_model(cfg.model, "LLM"), cfg)
llm = model.llm
tokens = llm.tokenize(("The robot turns its head to the left and waves. " * 300).encode())
llm.eval(tokens[:64])  # a first short turn: what is resident after the warm-up
before = anonymous_mib()
end = cfg.n_ctx - cfg.n_batch
for start in range(64, end, cfg.n_batch):  # full batches at every depth, up to a full context
    llm.eval(tokens[start : min(start + cfg.n_batch, end)])
print(json.dumps({"before": before, "after": anonymous_mib(), "filled": llm.n_tokens}))
"""


def _fill(flash_attn: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, flash_attn],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_shipped_configs_run_the_chat_model_with_flash_attention():
    for name in ("desktop.toml", "reachy_mini_sim.toml"):
        assert load_config(ROOT / "launch" / name).llm.flash_attn, name


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux /proc/PID/smaps_rollup")
def test_memory_stays_flat_as_the_context_fills_with_flash_attention_only():
    on, off = _fill("on"), _fill("off")
    assert on["filled"] == off["filled"] >= 1700, (on, off)
    # Bounds from the n_ctx 4096 measurement (docs/facts.md: +7 MiB on, +58 MiB off), halved context.
    assert on["after"] - on["before"] < 8, f"flash attention on: {on}"
    assert off["after"] - off["before"] > 16, f"flash attention off (the KQ matrix): {off}"
