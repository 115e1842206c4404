"""MuJoCo's OpenGL backend is chosen once per process, when ``mujoco`` is first imported: import it here.

``mujoco/gl_context.py`` reads ``MUJOCO_GL`` at import time and binds ``GLContext`` to GLFW
unless it says ``egl`` or ``osmesa``; ``mujoco/egl`` then sets ``PYOPENGL_PLATFORM=egl`` before
PyOpenGL loads. Whatever imports ``mujoco`` first decides for the whole process. In the agent
that was the head-vs-body collision check (:mod:`hardware.reachy_mini.collision`, built while the
robot connects), with ``MUJOCO_GL`` unset: GLFW was bound, and the simulated camera's
``setdefault("MUJOCO_GL", "egl")`` came too late. Without a display GLFW cannot make a context
("X11: The DISPLAY environment variable is missing"), ``mjr_makeContext`` fails ("an OpenGL
platform library has not been loaded into this process"), the half-built ``Renderer``'s
``__del__`` raises, and the next ``Renderer`` in the same process aborts it in MuJoCo's C++
(``__cxa_guard_acquire detected recursive initialization``, exit 134). A plain Python process
that set ``MUJOCO_GL=egl`` first rendered fine, and so did the tests, which set it for the
daemon. Every import of ``mujoco`` in ``hardware/`` goes through :func:`import_mujoco`, which
sets the offscreen default before the first import; the renderer itself runs in a child
process (:mod:`hardware.reachy_mini.sim_render`), so a GL fault can never end the agent.

This writes ``os.environ`` (``MUJOCO_GL``, ``PYOPENGL_PLATFORM``) when it is called, never at
import time; a value the user set is kept.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

OFFSCREEN_GL = "egl"
"""The default backend: Mesa's EGL renders on the CPU without a display (llvmpipe), or on a GPU."""


class MujocoUnavailable(ImportError):
    """``mujoco`` is not installed, or its OpenGL backend failed at import; the message says which."""


def import_mujoco() -> ModuleType:
    """``mujoco``, first imported with ``MUJOCO_GL=egl`` and ``PYOPENGL_PLATFORM=egl`` unless set.

    Returns:
        The ``mujoco`` module (possibly imported earlier by someone else: :func:`gl_backend`
        says which backend it bound).

    Raises:
        MujocoUnavailable: not installed, or the backend's libraries failed to load.
    """
    if "mujoco" not in sys.modules:
        os.environ.setdefault("MUJOCO_GL", OFFSCREEN_GL)
        if os.environ["MUJOCO_GL"].strip().lower() == "egl":
            os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    try:
        import mujoco
    except ImportError as e:
        raise MujocoUnavailable(
            f"MuJoCo is not installed (BOLT_REACHY=1 bash launch/setup.sh run): {e}"
        ) from None
    except Exception as e:  # noqa: BLE001 - a GL backend fails at import with any error type
        raise MujocoUnavailable(
            f"mujoco cannot start its OpenGL backend MUJOCO_GL={os.environ.get('MUJOCO_GL')}: "
            f"{type(e).__name__}: {e}"
        ) from None
    return mujoco


def gl_backend(mujoco: ModuleType) -> str:
    """The backend ``mujoco`` bound at its import: ``egl``, ``osmesa``, ``glfw``, ``cgl`` or ``none``."""
    ctx = getattr(getattr(mujoco, "gl_context", None), "GLContext", None)
    if ctx is None:
        return "none"
    return str(getattr(ctx, "__module__", "")).rsplit(".", 1)[-1] or "none"


def offscreen_problem(mujoco: ModuleType) -> str | None:
    """Why ``mujoco`` cannot render offscreen in this process, or None when it may.

    GLFW needs a display: bound without one (``mujoco`` imported before ``MUJOCO_GL`` was set,
    or ``MUJOCO_GL=glfw``), creating a renderer would fail and a second try abort the process.
    """
    backend = gl_backend(mujoco)
    if backend == "none":
        return "mujoco was imported with MUJOCO_GL=disable: it cannot render"
    if backend == "glfw" and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return (
            "mujoco bound its GLFW backend, which needs a display (DISPLAY is not set): "
            "set MUJOCO_GL=egl (or osmesa) before it is first imported"
        )
    return None
