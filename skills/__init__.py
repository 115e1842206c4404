"""Built-in skills (motion, clock, timer, vision), loaded by the skill registry from this folder."""
