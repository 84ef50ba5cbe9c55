"""One module per console page: its handlers and the routes it adds (see adapters/web/app.py)."""
