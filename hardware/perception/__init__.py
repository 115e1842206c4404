"""Perception: what the camera's frames show, described at a low rate (the always-on OpenCV layer).

* :mod:`~hardware.perception.scene` — :class:`~hardware.perception.scene.Scene` and the OpenCV
  describer (Haar faces, HOG people, brightness, motion);
* :mod:`~hardware.perception.watcher` — :class:`~hardware.perception.watcher.Vision`, the thread
  that describes the newest frame and reports people arriving or leaving; ``build_vision``.

It sits here, not beside the words of ``agent/vision/``, because the skills' context (the lowest
layer of ``agent/``) types its ``scene`` with :class:`~hardware.perception.watcher.Vision`: in
``agent/`` that would be an upward import.
"""
