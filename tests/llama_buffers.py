"""What llama.cpp itself reports about its buffers, captured from its log in a subprocess.

llama.cpp writes ``... model buffer size = X MiB``, ``... KV buffer size = X MiB``,
``... compute buffer size = X MiB`` and ``... output buffer size = X MiB`` to file
descriptor 2 from C code; the child process points fd 2 at a file before constructing
``llama_cpp.Llama(verbose=True)``, and this module parses that file (:func:`parse_report`).
A subprocess keeps the C library's log handler and memory out of the test process.
llama-server writes the same lines to its log for the chat model and then for a draft model
(:func:`server_reports` splits them).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

_CHILD = r"""
import json, os, sys
args = json.loads(sys.argv[1])
fd = os.open(args.pop("log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.dup2(fd, 2)
overrides = args.pop("model_params", None)
import llama_cpp
from llama_cpp import Llama
if overrides:
    import llama_cpp.llama as mod
    base = mod.llama_cpp.llama_model_default_params
    def params():
        p = base()
        for key, value in overrides.items():
            setattr(p, key, value)
        return p
    mod.llama_cpp.llama_model_default_params = params
for k in ("type_k", "type_v"):
    if k in args:
        args[k] = getattr(llama_cpp, "GGML_TYPE_" + args[k].upper())
Llama(verbose=True, **args)
"""

_BUF = re.compile(r"(\S+)\s+(model|KV|compute|output) buffer size =\s+([\d.]+) MiB")
_CACHE = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers")


@dataclass
class Reported:
    """Buffer sizes llama.cpp logged, MiB, summed per kind (and listed per buffer)."""

    model: float = 0.0
    kv: float = 0.0
    compute: float = 0.0
    output: float = 0.0
    buffers: list[tuple[str, str, float]] = field(default_factory=list)
    caches: list[tuple[int, int, float]] = field(default_factory=list)  # (cells, layers, MiB) per KV cache
    log: str = ""


def measure(model_path: Path, **llama_args) -> Reported:
    """Construct ``Llama(model_path, **llama_args)`` in a child process and parse its buffer report.

    ``type_k``/``type_v`` may be given as names (``"q8_0"``); ``model_params`` sets fields of
    ``llama_model_params`` that llama-cpp-python does not expose (``{"lazy_mode": 2}``,
    ``{"use_extra_bufts": False}``). Raises ``RuntimeError`` with the log tail when
    construction fails.
    """
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "llama.log"
        args = {
            "model_path": str(model_path),
            "n_threads": 1,
            "n_threads_batch": 1,
            "log": str(log),
            **llama_args,
        }
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(args)], capture_output=True, text=True, timeout=300
        )
        text = log.read_text(errors="replace") if log.exists() else ""
    if proc.returncode != 0:
        raise RuntimeError(f"llama.cpp failed ({proc.returncode}): {text[-2000:]}{proc.stderr[-2000:]}")
    return parse_report(text)


def server_reports(text: str) -> tuple[Reported, Reported | None]:
    """The chat model's and the draft model's buffer reports in one llama-server log.

    llama-server loads the target model and its context first, then logs ``loading draft
    model`` (common/speculative.cpp) and loads the drafter and its context; the log is split
    there. Returns ``(target, draft)``; ``draft`` is None when no drafter was loaded.
    """
    text = text[max(text.rfind("--- bolt-agent starts:"), 0) :]  # the last start of the server only
    at = text.find("loading draft model")
    if at < 0:
        return parse_report(text), None
    return parse_report(text[:at]), parse_report(text[at:])


def parse_report(text: str) -> Reported:
    """Buffer sizes in a llama.cpp log, MiB (compute: the last report per buffer name)."""
    rep = Reported(log=text)
    seen_compute: dict[str, float] = {}
    for m in _BUF.finditer(text):
        name, kind, mib = m.group(1), m.group(2), float(m.group(3))
        if kind == "compute":  # reported once per reserve; the last report is the final size
            seen_compute[name] = mib
            continue
        rep.buffers.append((name, kind, mib))
        setattr(rep, kind.lower(), getattr(rep, kind.lower()) + mib)
    rep.caches = [(int(m.group(2)), int(m.group(3)), float(m.group(1))) for m in _CACHE.finditer(text)]
    rep.compute = sum(seen_compute.values())
    rep.buffers += [(n, "compute", v) for n, v in seen_compute.items()]
    return rep
