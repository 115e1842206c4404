"""Cameras: sources, the capture thread, USB cameras by id, and the doctor's camera check.

* :mod:`~hardware.camera.base` — :class:`~hardware.camera.base.CameraError`, the reader protocol,
  named sources (a robot's own camera, exported by its package);
* :mod:`~hardware.camera.sources` — what ``[camera] source`` names, opened as a frame reader;
* :mod:`~hardware.camera.usb` — a USB camera by its ids, found in sysfs;
* :mod:`~hardware.camera.capture` — :class:`~hardware.camera.capture.Camera`, the thread that keeps
  the newest frame, and the feed's health rules;
* :mod:`~hardware.camera.doctor` — ``bolt-agent doctor``'s camera check.

What a frame shows (faces, people, light) is :mod:`hardware.perception`'s.
"""
