"""A Reachy Mini (Pollen Robotics) as bolt-agent's body: driver, daemon client, poses, moves, cameras.

* :mod:`~hardware.reachy_mini.driver` — :class:`~hardware.reachy_mini.driver.ReachyMiniDriver`
  (Pollen's SDK client, reachability and self-collision checks, e-stop hold, parking) and its
  ``SPEC``;
* :mod:`~hardware.reachy_mini.daemon` — the daemon's REST API (status, motor mode) and the SDK's
  release rule;
* :mod:`~hardware.reachy_mini.pose` — our joints ↔ the SDK's head 4x4, antennas, body yaw;
* :mod:`~hardware.reachy_mini.collision` — head-vs-body clearance on Pollen's collision hulls;
* :mod:`~hardware.reachy_mini.moves` — Pollen's dances and recorded moves (emotions) as gestures;
* :mod:`~hardware.reachy_mini.camera` — the Lite's USB camera and the simulator's eye camera, as
  named camera sources; :mod:`~hardware.reachy_mini.sim_eye` renders the eye camera with MuJoCo,
  in a child process (:mod:`~hardware.reachy_mini.sim_render`); :mod:`~hardware.reachy_mini.mujoco_gl`
  binds MuJoCo's offscreen OpenGL before its first import;
* :mod:`~hardware.reachy_mini.doctor` — ``bolt-agent doctor``'s checks of daemon, release, motors
  and emotions.

It builds on the body's base (config, driver protocol, animations) and on :mod:`hardware.camera`;
nothing outside :mod:`hardware.registry` imports it by kind.
"""
