"""GBNF grammars for a round's output: from a JSON schema, or as written.

A :class:`~agent.engines.request.Decoding` carries its grammar as GBNF text, which every engine
takes: the embedded one gives it to llama.cpp's grammar sampler, llama-server takes it as the
request's ``grammar`` field. JSON schemas are converted with llama-cpp-python's converter
(``llama_cpp.llama_grammar.json_schema_to_gbnf``, a port of llama.cpp's
``json_schema_to_grammar``): required properties first, in schema order, and ``json.dumps``
spacing (``", "`` and ``": "``).
"""

from __future__ import annotations

import functools
import json
from typing import Any


def gbnf_from_schema(schema: dict[str, Any]) -> str:
    """The GBNF of a JSON schema (root rule ``root``).

    Args:
        schema: A JSON schema (objects, strings, numbers, enums, ``anyOf``).

    Returns:
        GBNF text.

    Raises:
        ValueError: the converter does not support a construct of the schema.
    """
    return _convert(json.dumps(schema, sort_keys=False))


@functools.lru_cache(maxsize=64)
def _convert(schema_json: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema_json)
