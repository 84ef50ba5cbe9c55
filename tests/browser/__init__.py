"""Browser tests of the web console: Playwright driving Debian's headless chromium."""
