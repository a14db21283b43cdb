"""``python -m ridgeline``: the same command as ``ridgeline``."""

from ridgeline.cli import main

if __name__ == "__main__":
    main()
