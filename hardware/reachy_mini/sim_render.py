"""The simulated eye camera renders in a child process: a GL fault there never ends the agent.

MuJoCo's offscreen renderer lives in C++ and OpenGL: a renderer that failed once cannot be made
again in the same process (the second ``mujoco.Renderer`` aborts it, exit 134; see
:mod:`hardware.reachy_mini.mujoco_gl`), and a driver fault in EGL or Mesa is a signal, not an
exception. So the agent never renders: :class:`RenderProcess` (a
:class:`~hardware.camera.base.FrameReader`) starts ``python -m hardware.reachy_mini.sim_render``,
which opens :class:`~hardware.reachy_mini.sim_eye.SimEyeCamera` (posed from the daemon), and asks
it for one frame per :meth:`RenderProcess.read`. A child that fails to open says why and exits;
one that dies (any signal) makes ``read`` return ``(False, None)`` with the reason in
:attr:`RenderProcess.problem`; the camera's capture thread then reports the fault and reopens
with backoff, which starts a fresh child. The child exits when its stdin closes (the agent
released it, or died).

**Protocol** (the child's stdin and stdout, binary): the child first writes one header; then for
every request line (``frame`` and a newline) one header and, when ``ok``, the frame's bytes. A header is one
JSON line: ``{"ok": true, "shape": [h, w, 3], "hfov_deg": ...}`` (BGR ``uint8``, ``h*w*3``
bytes follow) or ``{"ok": false, "problem": "..."}``. The child's stderr is kept (last lines)
for the messages. Measured here (2 cores, Mesa llvmpipe): a 640x360 frame through the pipe adds
about 1 ms to the 70-80 ms render.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from hardware.camera.base import CameraError

log = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 60.0
"""Longest wait for the child's first frame (model load, settling, renderer: 1.6-2.3 s unloaded), s."""
FRAME_TIMEOUT_S = 5.0
"""Longest wait for one frame (70-360 ms on 2 cores), s: longer is a hung renderer."""
ROOT = Path(__file__).resolve().parents[2]


def _signal_name(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class RenderProcess:
    """A simulated eye camera rendered by a child process (a ``FrameReader``).

    Args:
        host: The daemon's host (the head is posed from its joint state).
        port: The daemon's REST port.
        width: Frame width, px.
        height: Frame height, px.
        scene: Pollen's scene (``minimal``, ``empty``).
        open_timeout_s: Longest wait for the child's first frame, s.

    Raises:
        CameraError: the child could not start, or said why it cannot render (no daemon, no
            MuJoCo, no offscreen GL), or died or hung while opening; the message says which.
    """

    def __init__(
        self,
        host: str,
        port: int,
        width: int,
        height: int,
        scene: str = "minimal",
        open_timeout_s: float = OPEN_TIMEOUT_S,
    ) -> None:
        self.problem = ""
        self.hfov_deg = 0.0
        self.frames = 0
        self._buf = b""
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        env.setdefault("MUJOCO_GL", "egl")  # the user's choice is kept (mujoco_gl.import_mujoco)
        if env["MUJOCO_GL"].strip().lower() == "egl":
            env.setdefault("PYOPENGL_PLATFORM", "egl")
        cmd = [sys.executable, "-m", __name__, host, str(port), str(width), str(height), scene]
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
        except OSError as e:
            raise CameraError(f"cannot start the simulated camera's renderer process: {e}") from None
        threading.Thread(target=self._drain_stderr, name="sim-render-stderr", daemon=True).start()
        try:
            head = self._header(time.monotonic() + open_timeout_s)
        except CameraError:
            self.release()
            raise
        if not head.get("ok"):
            self.release()
            raise CameraError(str(head.get("problem") or "the renderer process could not open"))
        self.hfov_deg = float(head.get("hfov_deg", 0.0))
        self._first = self._payload(head, time.monotonic() + open_timeout_s)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.proc.pid

    def _drain_stderr(self) -> None:
        stream = self.proc.stderr
        if stream is None:
            return
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self._stderr.append(line)
                log.debug("sim renderer: %s", line)

    def _died(self) -> str:
        code = self.proc.poll()
        if code is None:
            return ""
        for _ in range(20):  # the stderr thread may still be reading the last lines
            if not self._stderr or self.proc.stderr is None or self.proc.stderr.closed:
                break
            time.sleep(0.01)
        last = [ln for ln in self._stderr if ln.strip()][-1:]
        return f"the renderer process ended ({_signal_name(code)})" + (f": {last[0]}" if last else "")

    def _fill(self, deadline: float) -> None:
        """Read what the child wrote into the buffer; raise CameraError when it died or hung."""
        out = self.proc.stdout
        assert out is not None
        fd = out.fileno()
        left = deadline - time.monotonic()
        if left <= 0:
            raise CameraError(f"the renderer process did not answer within {FRAME_TIMEOUT_S:g} s (hung)")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise CameraError("the renderer process did not answer in time (hung)")
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            self.proc.wait(2.0) if self.proc.poll() is None else None
            raise CameraError(self._died() or "the renderer process closed its output")
        self._buf += chunk

    def _header(self, deadline: float) -> dict:
        while b"\n" not in self._buf:
            self._fill(deadline)
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            head = json.loads(line)
        except ValueError:
            raise CameraError(f"the renderer process wrote {line[:80]!r}, not a header") from None
        return head if isinstance(head, dict) else {"ok": False, "problem": f"bad header {head!r}"}

    def _payload(self, head: dict, deadline: float) -> np.ndarray:
        h, w, c = (int(x) for x in head["shape"])
        n = h * w * c
        while len(self._buf) < n:
            self._fill(deadline)
        data, self._buf = self._buf[:n], self._buf[n:]
        self.frames += 1
        return np.frombuffer(data, dtype=np.uint8).reshape(h, w, c).copy()

    def read(self) -> tuple[bool, np.ndarray | None]:
        """One frame at the daemon's present pose: ``(ok, BGR uint8 (h, w, 3))``.

        ``(False, None)`` when the child could not render it (the daemon stopped answering) or
        is gone (died, hung): :attr:`problem` says why; the capture thread then reopens.
        """
        first = getattr(self, "_first", None)
        if first is not None:
            self._first = None
            return True, first
        if self.proc.poll() is not None or self.proc.stdin is None or self.proc.stdin.closed:
            self.problem = self._died() or "the renderer process is closed"
            return False, None
        try:
            self.proc.stdin.write(b"frame\n")
            self.proc.stdin.flush()
            deadline = time.monotonic() + FRAME_TIMEOUT_S
            head = self._header(deadline)
            if not head.get("ok"):
                self.problem = str(head.get("problem", "the renderer gave no frame"))
                return False, None
            frame = self._payload(head, deadline)
        except (OSError, CameraError, KeyError, ValueError) as e:
            self.problem = self._died() or str(e)
            self._kill()  # a hung or broken child is not asked again
            return False, None
        self.problem = ""
        return True, frame

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(2.0)
            except subprocess.TimeoutExpired:
                pass

    def release(self) -> None:
        """End the child: close its stdin (it exits), then kill it if it has not within 2 s."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            self._kill()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except OSError:
                    pass


def _write(out, head: dict, frame: np.ndarray | None = None) -> None:  # noqa: ANN001 - a binary stream
    out.write(json.dumps(head).encode("utf-8") + b"\n")
    if frame is not None:
        out.write(np.ascontiguousarray(frame, dtype=np.uint8).tobytes())
    out.flush()


def serve(host: str, port: int, width: int, height: int, scene: str) -> int:
    """The child's loop: open the camera, then one frame per request line, until stdin closes.

    Returns:
        0 at end of input; 1 when the camera could not open (the header said why).
    """
    from hardware.reachy_mini.sim_eye import SimEyeCamera

    out = sys.stdout.buffer
    try:
        cam = SimEyeCamera(host, port, width, height, scene)
    except CameraError as e:
        _write(out, {"ok": False, "problem": str(e)})
        return 1
    ok, frame = cam.read()
    if not ok or frame is None:
        _write(out, {"ok": False, "problem": cam.problem or "the first frame failed"})
        return 1
    _write(out, {"ok": True, "shape": list(frame.shape), "hfov_deg": cam.hfov_deg}, frame)
    for line in sys.stdin.buffer:
        if line.strip() != b"frame":
            continue
        ok, frame = cam.read()
        if ok and frame is not None:
            _write(out, {"ok": True, "shape": list(frame.shape)}, frame)
        else:
            _write(out, {"ok": False, "problem": cam.problem or "no frame"})
    cam.release()
    return 0


if __name__ == "__main__":  # python -m hardware.reachy_mini.sim_render HOST PORT WIDTH HEIGHT SCENE
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    a = sys.argv[1:]
    sys.exit(serve(a[0], int(a[1]), int(a[2]), int(a[3]), a[4]))
