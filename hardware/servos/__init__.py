"""Servo drivers: each speaks one protocol on one serial port and exports its ``SPEC``.

* :mod:`~hardware.servos.serial_link` — the worker thread, reconnects and fault messages every
  serial driver shares, and :func:`~hardware.servos.serial_link.build_serial`;
* :mod:`~hardware.servos.bus` — the base of position servos that take a speed and acceleration;
* :mod:`~hardware.servos.bolt_serial` — the bolt_servo line protocol (``hardware/PROTOCOL.md``);
* :mod:`~hardware.servos.maestro` — Pololu Maestro, compact protocol;
* :mod:`~hardware.servos.feetech` — Feetech STS bus through ``feetech-servo-sdk``;
* :mod:`~hardware.servos.sim` — the simulated driver (the default body);
* :mod:`~hardware.servos.doctor` — ``bolt-agent doctor``'s serial port check.

Nothing here imports another concern of ``hardware/`` (cameras, the Reachy Mini): only the
body's base (config, joints, the driver protocol).
"""
