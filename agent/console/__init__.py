"""The live web console of ``bolt-agent run --console``: watch, talk to and stop the robot.

A page served by the agent itself (Starlette + uvicorn, plain HTML/JS/CSS in ``static/``,
no build step), pushed live over Server-Sent Events: the conversation as it happens, each
turn's latency waterfall, the camera, the joints against their limits, the memory plan;
controls to type a user turn, mute the microphone, play an animation, and latch or clear
the robot's emergency stop. Nothing here is imported unless the console is asked for.

Modules, by concern:

* :mod:`~agent.console.service` — :class:`Console`, the one object the CLI uses;
* :mod:`~agent.console.feed` — the bus's typed messages → console messages, state ticker;
* :mod:`~agent.console.hub` — per-client bounded queues, fan-out that never blocks;
* :mod:`~agent.console.snapshot` — info (models, memory plan), body and camera snapshots;
* :mod:`~agent.console.controls` — the controls, through the pipeline and the robot's safety layer;
* :mod:`~agent.console.auth` — token file, token checks, rate limit;
* :mod:`~agent.console.app` — HTTP routes and the request guard;
* :mod:`~agent.console.server` — uvicorn in a thread; ``--console [HOST:PORT]`` parsing.
"""

from agent.console.auth import default_token_path, ensure_token, is_loopback
from agent.console.server import ConsoleServer, parse_bind
from agent.console.service import Console

__all__ = ["Console", "ConsoleServer", "default_token_path", "ensure_token", "is_loopback", "parse_bind"]
