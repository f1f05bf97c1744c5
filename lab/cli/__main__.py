"""``python -m lab.cli``: the same command as ``lab``."""
from lab.cli import main

main()
