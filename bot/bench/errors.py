"""What ends `clawgate bench ingest` with one line and exit 1."""


class BenchError(Exception):
    """The bench could not run (the server did not start, a reply never came...)."""
