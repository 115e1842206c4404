"""The robot body: joints, safety layer, actuator drivers, animations, camera and vision."""
