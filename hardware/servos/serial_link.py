"""Serial drivers' shared machinery: one worker thread per port, reconnects, fault messages.

Threading: each :class:`SerialDriver` owns one port and one daemon worker thread; nothing
else touches the port. :meth:`SerialDriver.write` only stores the newest target per joint
(older, unsent targets are superseded, never queued up) and wakes the worker, so the robot's
control loop never blocks on I/O. Control operations (torque, emergency stop) are queued;
an emergency stop drops every pending target and jumps the queue.

Faults:
* port missing, permission denied (the message names the ``dialout`` group), or the device
  answers garbage → state ``offline`` with a message the agent can speak; the worker retries
  with exponential backoff (``backoff_initial_s`` doubling up to ``backoff_max_s``), sleeping
  on an event between tries — no busy loop;
* an I/O error while online (unplugged) → port closed, state ``offline``, same reconnect
  loop; the ``/dev/serial/by-id`` link of the port that worked is tried first, because a
  re-plugged USB device may come back under another ``ttyACMn`` name;
* reply timeouts are retried by the protocol module; several in a row count as a lost link.

Protocol modules implement ``_setup``, ``_send_targets``, ``_torque``, ``_estop``, ``_heartbeat``,
``_poll``; they raise :class:`LinkLost`/:class:`ProtocolError` and report servo flags via ``_fault``.
:func:`build_serial` builds any of them from ``[robot.drivers.NAME]`` for its kind's
:class:`~hardware.driver.DriverSpec`.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import serial

from hardware.driver import Channel, DriverRequest, DriverState, StatusCallback

log = logging.getLogger(__name__)

BY_ID_DIR = Path("/dev/serial/by-id")


class LinkLost(Exception):
    """The port stopped working (unplugged, I/O error, repeated timeouts)."""


class ProtocolError(Exception):
    """The device answered, but not in the expected protocol (wrong port, baud or device)."""


class PortUnavailable(Exception):
    """The port could not be opened; the message says why and what to do."""


def open_error_message(port: str, exc: BaseException) -> str:
    """Explain a failed open clearly: missing port, permission (dialout), busy, other."""
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code == errno.EACCES or "Permission denied" in text:
        return (
            f"permission denied on {port}: add your user to the 'dialout' group "
            f"(sudo usermod -aG dialout $USER, then log in again)"
        )
    if code == errno.ENOENT or "No such file" in text:
        return f"serial port {port} not found (is the device plugged in? see ls /dev/serial/by-id)"
    if code in (errno.EBUSY, errno.EAGAIN) or "exclusively lock" in text:
        return f"serial port {port} is in use by another program"
    return f"cannot open serial port {port}: {text}"


class SerialDriver:
    """Base class of the serial drivers (see the module docstring for threading and faults).

    Args:
        name: Driver name from the config (used in messages).
        port: Device path, or a name under ``by_id_dir``.
        channels: One :class:`Channel` per joint this driver moves.
        baud: Baud rate, bit/s.
        timeout_s: Reply timeout, s.
        poll_hz: Position read-back rate, Hz (0 = never).
        heartbeat_s: Idle time after which ``_heartbeat`` is called, s (0 = never).
        backoff_initial_s: First reconnect delay, s.
        backoff_max_s: Largest reconnect delay, s.
        on_status: Called as ``(name, state, message)`` on every state change.
        by_id_dir: Where stable device links live (``/dev/serial/by-id``).

    """

    kind = "serial"

    def __init__(
        self,
        name: str,
        port: str,
        channels: list[Channel],
        *,
        baud: int = 115200,  # fmt: skip
        timeout_s: float = 0.1,
        poll_hz: float = 5.0,
        heartbeat_s: float = 0.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 10.0,
        on_status: StatusCallback | None = None,
        by_id_dir: Path = BY_ID_DIR,
    ) -> None:
        self.name = name
        self.port = port
        self.channels = {c.joint: c for c in channels}
        self.baud = baud
        self.timeout_s = timeout_s
        self.poll_s = 1.0 / poll_hz if poll_hz > 0 else 0.0
        self.heartbeat_s = heartbeat_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = max(backoff_max_s, backoff_initial_s)
        self.on_status = on_status
        self.by_id_dir = Path(by_id_dir)
        self.state: DriverState = "connecting"
        self.message = ""
        self.faults: dict[str, str] = {}
        self.connects = 0
        self._remembered: str | None = None
        self._handle: Any = None
        self._cond = threading.Condition()
        self._pending: dict[str, float] = {}
        self._duration_ms = 0.0
        self._ops: list[Callable[[], None]] = []
        self._busy = False
        self._submitted = 0
        self._done = 0
        self._torque_wanted = True
        self._positions: dict[str, float] = {}
        self._stop = threading.Event()
        self._closing = threading.Event()  # the last frames are queued: no heartbeat or poll after them
        self._first_try = threading.Event()
        self._last_tx = 0.0
        self._last_poll = 0.0
        self._reported: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name=f"serial-{name}", daemon=True)

    # --- public interface ---------------------------------------------------------
    def start(self, wait_s: float = 3.0) -> DriverState:
        """Start the worker and wait up to ``wait_s`` (s) for the first connection attempt."""
        self._thread.start()
        self._first_try.wait(wait_s)
        return self.state

    def write(self, targets: dict[str, float], duration_ms: float = 0.0) -> None:
        """Store the newest targets (degrees) for the worker; dropped while offline."""
        if self.state != "online":
            return
        with self._cond:
            self._pending.update({j: d for j, d in targets.items() if j in self.channels})
            self._duration_ms = max(0.0, float(duration_ms))
            self._submitted += 1
            self._cond.notify_all()

    def read(self) -> dict[str, float]:
        """Last positions read back from the device (or last sent), degrees."""
        with self._cond:
            return dict(self._positions)

    def set_torque(self, on: bool) -> None:
        """Queue torque on/off for every channel (remembered and re-applied after a reconnect)."""
        self._torque_wanted = on
        self._queue(lambda: self._torque(on))

    def estop(self) -> None:
        """Drop pending targets and cut torque at once (jumps the queue)."""
        self._torque_wanted = False
        with self._cond:
            self._pending.clear()
            self._ops.insert(0, self._estop)
            self._submitted += 1
            self._cond.notify_all()

    def sync(self, timeout_s: float = 1.0) -> bool:
        """Block until the worker has sent everything queued; False on timeout or when offline."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            target = self._submitted
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0 or self.state != "online":
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def begin_close(self) -> None:
        """The last frames follow (a park's torque-off): no heartbeat or position poll from now on.

        Without it a heartbeat due between the torque-off and :meth:`close` (a busy machine can
        keep the parking thread off the CPU that long) would follow the torque-off frame.
        """
        self._closing.set()

    def close(self) -> None:
        """Stop the worker (after it finished queued work, up to 1 s) and close the port.

        Nothing is sent after the queued work: no heartbeat or position poll once closing has
        begun (:meth:`begin_close`).
        """
        self._closing.set()
        if self.state == "online":
            self.sync(1.0)
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self._disconnect()
        self._set_state("closed", "")

    @property
    def by_id_link(self) -> str | None:
        """The stable ``/dev/serial/by-id`` link of the device last opened, None when none led to it.

        After an unplug the driver reconnects through this link first, so the device is found
        again when the kernel gives it another ``ttyACM``/``ttyUSB`` name.
        """
        return self._remembered

    def describe(self) -> str:
        """Name the driver for messages: ``robot driver '<name>' (<kind> on <port>)``."""
        return f"robot driver {self.name!r} ({self.kind} on {self._remembered or self.port})"

    # --- hooks for protocol modules ----------------------------------------------------
    def _open_port(self, path: str) -> Any:
        """Open the port and return the handle the hooks use (default: a pyserial port)."""
        t = self.timeout_s
        return serial.Serial(path, self.baud, timeout=t, write_timeout=t, exclusive=True)

    def _close_port(self, handle: Any) -> None:
        handle.close()

    def _setup(self) -> None:
        """Handshake after open (wait for ready, check identity, push limits/speeds)."""

    def _send_targets(self, units: dict[int, int], duration_ms: float) -> None:
        raise NotImplementedError

    def _torque(self, on: bool) -> None:
        raise NotImplementedError

    def _estop(self) -> None:
        self._torque(False)

    def _heartbeat(self) -> None:
        """Keep the device's watchdog fed (only protocols with a watchdog)."""

    def _poll(self) -> dict[int, int] | None:
        """Read present positions as ``{id: device units}``; None when unsupported."""
        return None

    def _fault(self, key: str, message: str) -> None:
        """Report a device fault (servo error flags): logged once per 5 s per key, kept in ``faults``."""
        self.faults[key] = message
        now = time.monotonic()
        if now - self._reported.get(key, -1e9) >= 5.0:
            self._reported[key] = now
            log.warning("%s: %s", self.describe(), message)

    # --- helpers for protocol modules ---------------------------------------------------
    def _write_all(self, data: bytes) -> None:
        """Write every byte or raise :class:`LinkLost` (partial write, timeout, I/O error)."""
        try:
            n = self._handle.write(data)
        except serial.SerialTimeoutException:
            raise LinkLost(f"write of {len(data)} bytes timed out (device not reading?)") from None
        except (serial.SerialException, OSError) as e:
            raise LinkLost(f"write failed ({e})") from None
        if n is not None and n != len(data):
            raise LinkLost(f"partial write: {n} of {len(data)} bytes")

    def _read_exact(self, n: int, timeout_s: float | None = None) -> bytes:
        """Read ``n`` bytes, waiting at most ``timeout_s``; returns what arrived (maybe fewer)."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        buf = b""
        try:
            while len(buf) < n and time.monotonic() < deadline:
                buf += self._handle.read(n - len(buf))
        except (serial.SerialException, OSError) as e:
            raise LinkLost(f"read failed ({e})") from None
        return buf

    def _read_some(self, timeout_s: float) -> bytes:
        """Read what arrives first (one byte plus anything buffered); b"" on timeout."""
        first = self._read_exact(1, timeout_s)
        if not first:
            return b""
        try:
            return first + self._handle.read(self._handle.in_waiting)
        except (serial.SerialException, OSError) as e:
            raise LinkLost(f"read failed ({e})") from None

    # --- worker -------------------------------------------------------------------------
    def _queue(self, op: Callable[[], None]) -> None:
        if self.state != "online":
            return
        with self._cond:
            self._ops.append(op)
            self._submitted += 1
            self._cond.notify_all()

    def _set_state(self, state: DriverState, message: str) -> None:
        changed = (state, message) != (self.state, self.message)
        new_state = state != self.state
        self.state, self.message = state, message
        if changed:
            if message:
                # One warning per outage; what the retries find meanwhile is detail.
                log.log(logging.WARNING if new_state else logging.INFO, "%s", message)
            else:
                log.info("%s: %s", self.describe(), state)
            if self.on_status is not None:
                self.on_status(self.name, state, message)

    def _candidates(self) -> list[str]:
        configured = self.port if "/" in self.port else str(self.by_id_dir / self.port)
        return [p for p in dict.fromkeys([self._remembered, configured]) if p]

    def _remember_by_id(self, opened: str) -> None:
        if str(opened).startswith(str(self.by_id_dir)):
            self._remembered = opened
            return
        real = os.path.realpath(opened)
        try:
            links = sorted(self.by_id_dir.iterdir())
        except OSError:
            return
        for link in links:
            if os.path.realpath(link) == real:
                self._remembered = str(link)
                return

    def _connect(self) -> None:
        errors = []
        for path in self._candidates():
            if not os.path.exists(path):
                errors.append(open_error_message(path, FileNotFoundError(errno.ENOENT, "No such file")))
                continue
            try:
                self._handle = self._open_port(path)
            except (serial.SerialException, OSError) as e:
                errors.append(open_error_message(path, e))
                continue
            self._remember_by_id(path)
            try:
                self._setup()
            except BaseException:
                self._disconnect()
                raise
            return
        raise PortUnavailable(errors[-1] if errors else f"no port configured for {self.name}")

    def _disconnect(self) -> None:
        h, self._handle = self._handle, None
        if h is not None:
            try:
                self._close_port(h)
            except (serial.SerialException, OSError) as e:
                log.debug("closing %s: %s", self.port, e)

    def _run(self) -> None:
        delay = self.backoff_initial_s
        while not self._stop.is_set():
            if self._handle is None:
                try:
                    self._connect()
                except (PortUnavailable, ProtocolError, LinkLost) as e:
                    self._set_state("offline", f"{self.describe()} offline: {e}; retrying in the background")
                    self._first_try.set()
                    self._stop.wait(delay)
                    delay = min(delay * 2, self.backoff_max_s)
                    continue
                delay = self.backoff_initial_s
                self.connects += 1
                self._set_state("online", "")
                self._first_try.set()
            try:
                self._service()
            except (LinkLost, ProtocolError) as e:
                self._disconnect()
                with self._cond:
                    self._pending.clear()
                    self._ops.clear()
                    self._busy = False
                    self._done = self._submitted
                    self._cond.notify_all()
                self._set_state("offline", f"{self.describe()} lost: {e}; reconnecting")

    def _next_wait(self, now: float) -> float:
        waits = [0.5]
        if self.heartbeat_s:
            waits.append(self._last_tx + self.heartbeat_s - now)
        if self.poll_s:
            waits.append(self._last_poll + self.poll_s - now)
        return max(0.0, min(waits))

    def _store_positions(self, units: dict[int, int]) -> None:
        by_id = {c.id: c for c in self.channels.values()}
        with self._cond:
            known = {i: u for i, u in units.items() if i in by_id}
            self._positions.update({by_id[i].joint: by_id[i].to_degrees(u) for i, u in known.items()})

    def _service(self) -> None:
        with self._cond:
            if not (self._pending or self._ops) and not self._stop.is_set():
                self._cond.wait(self._next_wait(time.monotonic()))
            ops, self._ops = self._ops, []
            pending, self._pending = self._pending, {}
            duration = self._duration_ms
            taken = self._submitted
            self._busy = True
        try:
            for op in ops:
                op()
                self._last_tx = time.monotonic()
            if pending:
                units = {self.channels[j].id: self.channels[j].to_device(d) for j, d in pending.items()}
                self._send_targets(units, duration)
                self._last_tx = time.monotonic()
                self._store_positions(units)
            now = time.monotonic()
            idle_work = not self._closing.is_set()  # closing: only the queued work goes out
            if idle_work and self.heartbeat_s and now - self._last_tx >= self.heartbeat_s:
                self._heartbeat()
                self._last_tx = time.monotonic()
            if idle_work and self.poll_s and now - self._last_poll >= self.poll_s:
                self._last_poll = now
                self._store_positions(self._poll() or {})
            with self._cond:
                self._done = max(self._done, taken)
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


def build_serial(
    req: DriverRequest,
    cls: type[SerialDriver],
    *,
    centre: float,
    per_deg: float,
    device_range: tuple[int, int],
    **extra: Any,
) -> tuple[SerialDriver, float]:
    """Create (not start) the serial driver of ``[robot.drivers.NAME]`` for the request's joints.

    Each joint gets a :class:`~hardware.driver.Channel` on the protocol's scale; the driver gets
    the section's link settings, every joint's top speed (deg/s) and neutral (deg).

    Args:
        req: The driver's name, the robot config and its joints.
        cls: The protocol's driver class (takes ``speeds`` and ``neutral``).
        centre: Device units at the servo's centre.
        per_deg: Device units per degree.
        device_range: The device's own range, units.
        **extra: More keyword arguments of ``cls`` (a board's ready timeout, watchdog).

    Returns:
        ``(driver, connect_wait_s)``: the section's wait for the first connection, s.
    """
    dcfg = req.robot.drivers[req.name]
    channels = [
        Channel.for_joint(
            j.name,
            j.id if j.id is not None else i,
            j.min_deg,
            j.max_deg,
            centre=centre,
            per_deg=per_deg,
            direction=j.direction,
            offset_deg=j.offset_deg,
            device_range=device_range,
        )
        for i, j in req.joints
    ]
    driver = cls(
        req.name,
        str(dcfg.port),
        channels,
        baud=dcfg.baud,
        timeout_s=dcfg.timeout_s,
        poll_hz=dcfg.poll_hz,
        backoff_initial_s=dcfg.backoff_initial_s,
        backoff_max_s=dcfg.backoff_max_s,
        on_status=req.on_status,
        by_id_dir=req.by_id_dir,
        speeds={j.name: j.max_speed_dps for _, j in req.joints},
        neutral={j.name: j.neutral_deg for _, j in req.joints},
        **extra,
    )
    return driver, dcfg.connect_wait_s
