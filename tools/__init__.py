"""Development tools of a checkout: benchmarks and the soak (``tools/bench/``).

Not part of the installed package (``pyproject.toml`` ships ``agent``, ``hardware``, ``skills``
and ``launch`` only): the robot never runs them. They import the product; the product never
imports them (``tests/test_layering.py``). ``bolt-agent bench``, ``soak`` and ``motion-bench``
start them from a checkout or a development install (:mod:`agent.cli.devtools`).
"""
