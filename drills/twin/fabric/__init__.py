"""The twin's switch fabric: a leaf/spine link-state model, vendor CLI dialects as data, and one
paramiko SSH server per switch so the drill's switch injector works exactly as on real switches."""
