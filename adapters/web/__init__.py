"""The web console: an aiohttp sub-app under /console/ with server-rendered pages."""
