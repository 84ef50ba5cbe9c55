"""`python -m clawgate`: the `clawgate` command (bot/cli.py)."""
